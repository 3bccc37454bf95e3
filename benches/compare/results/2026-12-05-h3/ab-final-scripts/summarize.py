#!/usr/bin/env python3
# Adapted from /work/notes/AB-h3-scripts/summarize.py: builds old/final, runs under /tmp/ab/final/runs,
# plus wrk (HTTPS over TCP 1 MiB, FINAL only) and the per-thread server CPU per run.
import json, re, os, statistics as st, sys
R = os.environ.get('RUNS', '/tmp/ab/final/runs')
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
    elif label.startswith('https'):
        m = re.search(r'(\d+) requests in ([\d.]+)s', txt)
        total = int(m.group(1)); out['wrk_secs'] = float(m.group(2))
        m2 = re.search(r'Non-2xx or 3xx responses: (\d+)', txt)
        out['non200'] = int(m2.group(1)) if m2 else 0
        out['ok'] = total - out['non200']
        m3 = re.search(r'Socket errors: (.*)', txt)
        out['errors'] = {'socket errors': m3.group(1)} if m3 else {}
        out['rps'] = out['ok'] / 10.0
        out['wrk_rps'] = float(re.search(r'Requests/sec:\s+([\d.]+)', txt).group(1))
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
    out['cli'] = (c['client_user'], c['client_sys']); out['cli_wall'] = c['client_wall']
    out['load'] = open(f'{p}/loadavg_start').read().split()[0]
    nd = {}
    if os.path.exists(f'{p}/nstat_delta'):
        for line in open(f'{p}/nstat_delta'):
            f = line.split(); nd[f[0]] = int(f[3].split('=')[1])
    out['nstat'] = nd
    th = []
    if os.path.exists(f'{p}/threads_delta'):
        for line in open(f'{p}/threads_delta'):
            m = re.match(r'threads (\S+) x(\d+): (\d+) ticks', line)
            if m: th.append((m.group(1), int(m.group(2)), int(m.group(3))))
    out['threads'] = sorted(th)
    return out
def med(xs):
    return st.median(xs), min(xs), max(xs)
def fmt(t, nd=1):
    m, lo, hi = t
    f = f'{{:,.{nd}f}}'
    return f'{f.format(m)} [{f.format(lo)}–{f.format(hi)}]'
TESTS = ('h3_1k', 'h3_1m', 'h2_1k', 'https_1m')
runs = {}
for t in TESTS:
    for b in ('old', 'final'):
        runs[(t, b)] = [parse(f'{t}_{b}_r{r}') for r in (1, 2, 3) if os.path.exists(f'{R}/{t}_{b}_r{r}/server_cpu')]
print('## Per run\n')
print('| run | load avg (1 min) at start | requests 200 (ok) | non-200 / errors | req/s (ok / 10 s) | client wall s (its own req/s) | server utime+stime ticks | server µs/req | client user+sys s | client µs/req | UDP InErrors/RcvbufErrors/SndbufErrors Δ | UDP InDatagrams Δ |')
print('|---|---:|---:|---|---:|---|---:|---:|---:|---:|---|---:|')
for (t, b), rs in runs.items():
    for x in rs:
        n = x['nstat']
        udp = f"{n.get('UdpInErrors',0)}/{n.get('UdpRcvbufErrors',0)}/{n.get('UdpSndbufErrors',0)}" if t.startswith('h3') else '–'
        err = f"{x['non200']} / " + (', '.join(f'{k}: {v}' for k, v in x['errors'].items()) if x['errors'] else (f"failed {x.get('failed',0)}, errored {x.get('errored',0)}" if 'failed' in x else 'none'))
        if 'oha_total' in x: ohaw = '%.1f (%s)' % (x['oha_total'], format(round(x['oha_rps']), ','))
        elif 'wrk_rps' in x: ohaw = '%.2f (%s)' % (x['wrk_secs'], format(x['wrk_rps'], ',.1f'))
        else: ohaw = '–'
        print(f"| {x['label']} | {x['load']} | {x['ok']:,} | {err} | {x['rps']:,.1f} | {ohaw} | {x['ticks_u']}+{x['ticks_s']}={x['ticks_u']+x['ticks_s']} | {x['srv_us']:,.2f} | {x['cli'][0]:.2f}+{x['cli'][1]:.2f} | {x['cli_us']:,.2f} | {udp} | {n.get('UdpInDatagrams','–') if t.startswith('h3') else '–'} |")
print('\n## Per-thread server CPU per run (ticks in the run; threads with 0 ticks omitted)\n')
for (t, b), rs in runs.items():
    for x in rs:
        print(f"- {x['label']}: " + ', '.join(f'{c} x{k}: {v}' for c, k, v in x['threads'] if v) + '; all threads: ' + ', '.join(f'{c} x{k}' for c, k, v in x['threads']))
print('\n## Medians [min–max] over 3 rounds\n')
print('| test | metric | OLD 52ac730 | FINAL 5285344 | FINAL/OLD (medians) |')
print('|---|---|---:|---:|---:|')
M = {}
for t in TESTS:
    for key, name, nd in (('srv_us', 'server µs CPU/request', 2), ('rps', 'requests/s', 1), ('cli_us', 'client µs CPU/request', 2)):
        o = med([x[key] for x in runs[(t, 'old')]]) if runs[(t, 'old')] else None
        nw = med([x[key] for x in runs[(t, 'final')]]) if runs[(t, 'final')] else None
        M[(t, 'old', key)] = o; M[(t, 'final', key)] = nw
        ratio = f'{nw[0]/o[0]:.2f}' if o and nw else '–'
        print(f"| {t} | {name} | {fmt(o, nd) if o else '–'} | {fmt(nw, nd) if nw else '–'} | {ratio} |")
print()
for b in ('old', 'final'):
    h3 = M.get(('h3_1k', b, 'srv_us')); h2 = M.get(('h2_1k', b, 'srv_us'))
    if h3 and h2:
        print(f"{b.upper()}: HTTP/3 1 KB / HTTP/2 1 KB server CPU per request = {h3[0]:.2f} / {h2[0]:.2f} = {h3[0]/h2[0]:.2f}x "
              f"(per-round ratios: {', '.join('%.2f' % (a['srv_us']/c['srv_us']) for a, c in zip(runs[('h3_1k', b)], runs[('h2_1k', b)]))})")
h3 = M.get(('h3_1m', 'final', 'rps')); tcp = M.get(('https_1m', 'final', 'rps'))
if h3 and tcp:
    print(f"FINAL: HTTP/3 1 MiB req/s / HTTPS-over-TCP 1 MiB req/s = {h3[0]:.1f} / {tcp[0]:.1f} = {h3[0]/tcp[0]:.2f}x "
          f"(per-round ratios: {', '.join('%.2f' % (a['rps']/c['rps']) for a, c in zip(runs[('h3_1m', 'final')], runs[('https_1m', 'final')]))})")
    s3 = M[('h3_1m', 'final', 'srv_us')]; st_ = M[('https_1m', 'final', 'srv_us')]
    print(f"FINAL: HTTP/3 1 MiB / HTTPS-over-TCP 1 MiB server CPU per request = {s3[0]:.1f} / {st_[0]:.1f} = {s3[0]/st_[0]:.2f}x")
