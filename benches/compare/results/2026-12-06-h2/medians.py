import sys, re, statistics as st, collections
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.match(r'r\d+ (\S+) (\S+)\s+(\S+)\s+([\d.]+) req/s\s+([\d.]+) us CPU/req\s+([\d.]+) us all', line)
    if m: d[(m[1], m[3], m[2])].append((float(m[4]), float(m[5]), float(m[6])))
for k in sorted(d):
    v = d[k]; r = [x[0] for x in v]; c = [x[1] for x in v]; a = [x[2] for x in v]
    print(f'{k[0]:6} {k[1]:7} {k[2]:7} req/s median {st.median(r):9.0f} [{min(r):.0f}-{max(r):.0f}]  server CPU/req {st.median(c):6.1f}  machine {st.median(a):6.1f}  n={len(v)}')
