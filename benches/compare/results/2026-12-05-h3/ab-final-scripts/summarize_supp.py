#!/usr/bin/env python3
# Supplementary NEW 417adaa vs FINAL (bench_supp.sh). Reuses summarize.py's parse() (its code up to def med).
import os, statistics as st
exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'summarize.py')).read().split('def med')[0])
def med(xs): return st.median(xs), min(xs), max(xs)
print('| run | load avg (1 min) at start | requests 200 | non-200 / errors | req/s (ok / 10 s) | oha wall s | server ticks | server µs/req | client µs/req | per-thread ticks | UDP InErrors/RcvbufErrors/SndbufErrors Δ |')
print('|---|---:|---:|---|---:|---:|---:|---:|---:|---|---|')
rs = {}
for t in ('h3_1k', 'h3_1m'):
    for b in ('new417', 'final'):
        for r in (1, 2, 3):
            x = parse(f'{t}_{b}_s{r}'); rs.setdefault((t, b), []).append(x); n = x['nstat']
            print(f"| {x['label']} | {x['load']} | {x['ok']:,} | {x['non200']} / {', '.join(f'{k}: {v}' for k, v in x['errors'].items())} | {x['rps']:,.1f} | {x['oha_total']:.1f} | {x['ticks_u']+x['ticks_s']} | {x['srv_us']:,.2f} | {x['cli_us']:,.2f} | "
                  + ', '.join(f'{c} x{k}: {v}' for c, k, v in x['threads'] if v)
                  + f" | {n.get('UdpInErrors',0)}/{n.get('UdpRcvbufErrors',0)}/{n.get('UdpSndbufErrors',0)} |")
print('\n| test | metric | NEW 417adaa | FINAL 5285344 | FINAL/NEW |\n|---|---|---:|---:|---:|')
for t in ('h3_1k', 'h3_1m'):
    for key, name in (('srv_us', 'server µs CPU/request'), ('rps', 'requests/s (ok / 10 s)'), ('cli_us', 'client µs CPU/request')):
        a = med([x[key] for x in rs[(t, 'new417')]]); b = med([x[key] for x in rs[(t, 'final')]])
        print(f"| {t} | {name} | {a[0]:,.2f} [{a[1]:,.2f}–{a[2]:,.2f}] | {b[0]:,.2f} [{b[1]:,.2f}–{b[2]:,.2f}] | {b[0]/a[0]:.2f} |")
