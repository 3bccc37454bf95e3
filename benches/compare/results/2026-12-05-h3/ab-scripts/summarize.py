#!/usr/bin/env python3
import json, re, os, statistics as st, sys
R = '/tmp/ab/runs'
def kv(path):
    d = {}
    for tok in open(path).read().split():
        if '=' in tok:
            k, v = tok.split('=', 1); d[k] = float(v)
    return d
def parse(label):
    p = f'{R}/{label}'
    s = kv(f'{p}/server_cpu'); c = kv(f'{p}/client_time')
    out = {'label': label, 'ticks_u': int(s['server_utime_ticks']), 'ticks_s': int(s['server_stime_ticks'])}
    txt = open(f'{p}/client_out').read()
    if label.startswith('h3'):
        j = json.loads(txt)
        codes = {k: v for k, v in j['statusCodeDistribution'].items()}
        out['ok'] = codes.get('200', 0); out['codes'] = codes
        out['non200'] = sum(v for k, v in codes.items() if k != '200')
        out['errors'] = j.get('errorDistribution', {})
        out['rps'] = out['ok'] / 10.0   # completed within oha's -z 10s window
        out['oha_rps'] = j['summary']['requestsPerSec']; out['oha_total'] = j['summary']['total']
    else:
        m = re.search(r'requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored', txt)
        out['ok'] = int(m.group(4)); out['failed'] = int(m.group(5)); out['errored'] = int(m.group(6))
        m2 = re.search(r'status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx', txt)
        out['codes'] = {'2xx': int(m2.group(1)), '3xx': int(m2.group(2)), '4xx': int(m2.group(3)), '5xx': int(m2.group(4))}
        out['non200'] = int(m2.group(2)) + int(m2.group(3)) + int(m2.group(4))
        out['errors'] = {}
        out['rps'] = float(re.search(r'finished in [\d.]+s, ([\d.]+) req/s', txt).group(1))
    out['srv_us'] = (out['ticks_u'] + out['ticks_s']) * 10000 / out['ok']
    out['cli_us'] = (c['client_user'] + c['client_sys']) * 1e6 / out['ok']
    out['cli'] = (c['client_user'], c['client_sys'])
    out['load'] = open(f'{p}/loadavg_start').read().split()[0]
    nd = {}
    if os.path.exists(f'{p}/nstat_delta'):
        for line in open(f'{p}/nstat_delta'):
            f = line.split(); nd[f[0]] = int(f[3].split('=')[1])
    out['nstat'] = nd
    return out
def med(xs):
    return st.median(xs), min(xs), max(xs)
def fmt(t, nd=1):
    m, lo, hi = t
    f = f'{{:,.{nd}f}}'
    return f'{f.format(m)} [{f.format(lo)}–{f.format(hi)}]'
runs = {}
for t in ('h3_1k', 'h3_1m', 'h2_1k'):
    for b in ('old', 'new'):
        runs[(t, b)] = [parse(f'{t}_{b}_r{r}') for r in (1, 2, 3) if os.path.exists(f'{R}/{t}_{b}_r{r}/server_cpu')]
print('## Per run\n')
print('| run | load avg (1 min) at start | requests 200 (ok) | non-200 / errors | req/s (ok / 10 s) | oha wall s (its own req/s) | server utime+stime ticks | server µs/req | client user+sys s | client µs/req | UDP InErrors/RcvbufErrors/SndbufErrors Δ | UDP InDatagrams Δ |')
print('|---|---:|---:|---|---:|---|---:|---:|---:|---:|---|---:|')
for (t, b), rs in runs.items():
    for x in rs:
        n = x['nstat']
        udp = f"{n.get('UdpInErrors',0)}/{n.get('UdpRcvbufErrors',0)}/{n.get('UdpSndbufErrors',0)}" if t.startswith('h3') else '–'
        err = f"{x['non200']} / " + (', '.join(f'{k}: {v}' for k, v in x['errors'].items()) if x['errors'] else (f"failed {x.get('failed',0)}, errored {x.get('errored',0)}" if 'failed' in x else 'none'))
        ohaw = ('%.1f (%s)' % (x['oha_total'], format(round(x['oha_rps']), ','))) if 'oha_total' in x else '–'
        print(f"| {x['label']} | {x['load']} | {x['ok']:,} | {err} | {x['rps']:,.0f} | {ohaw} | {x['ticks_u']}+{x['ticks_s']}={x['ticks_u']+x['ticks_s']} | {x['srv_us']:,.2f} | {x['cli'][0]:.2f}+{x['cli'][1]:.2f} | {x['cli_us']:,.2f} | {udp} | {n.get('UdpInDatagrams','–') if t.startswith('h3') else '–'} |")
print('\n## Medians [min–max] over 3 rounds\n')
print('| test | metric | OLD 52ac730 | NEW 417adaa | NEW/OLD (medians) |')
print('|---|---|---:|---:|---:|')
M = {}
for t in ('h3_1k', 'h3_1m', 'h2_1k'):
    for key, name, nd in (('srv_us', 'server µs CPU/request', 2), ('rps', 'requests/s', 0), ('cli_us', 'client µs CPU/request', 2)):
        o = med([x[key] for x in runs[(t, 'old')]]) if runs[(t, 'old')] else None
        nw = med([x[key] for x in runs[(t, 'new')]]) if runs[(t, 'new')] else None
        M[(t, 'old', key)] = o; M[(t, 'new', key)] = nw
        ratio = f'{nw[0]/o[0]:.2f}' if o and nw else '–'
        print(f"| {t} | {name} | {fmt(o, nd) if o else '–'} | {fmt(nw, nd) if nw else '–'} | {ratio} |")
print()
for b in ('old', 'new'):
    h3 = M.get(('h3_1k', b, 'srv_us')); h2 = M.get(('h2_1k', b, 'srv_us'))
    if h3 and h2:
        print(f"{b.upper()}: HTTP/3 1 KB / HTTP/2 1 KB server CPU per request = {h3[0]:.2f} / {h2[0]:.2f} = {h3[0]/h2[0]:.2f}x "
              f"(range of per-round ratios: {', '.join('%.2f' % (a['srv_us']/c['srv_us']) for a, c in zip(runs[('h3_1k', b)], runs[('h2_1k', b)]))})")
