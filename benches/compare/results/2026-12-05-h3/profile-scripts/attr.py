#!/usr/bin/env python3
"""For samples whose self frame is allocation, copies or generic Rust, name the first
caller frame that belongs to a named bucket (dwarf call chains)."""
import sys, re, collections, importlib.util
spec = importlib.util.spec_from_file_location('b', '/tmp/h3run/bucket.py')
src = open('/tmp/h3run/bucket.py').read().replace('\nmain()\n', '\n')
ns = {}
exec(compile(src, 'bucket', 'exec'), ns)
bucket = ns['bucket']
GEN = ('alloc:', 'copies:', 'generic', 'libc other', 'unknown')
tot = collections.Counter(); attr = collections.defaultdict(collections.Counter); fr = collections.defaultdict(collections.Counter)
alls = 0
allb = collections.Counter()
def flush(chain):
    global alls
    if not chain: return
    alls += 1
    s, d = chain[0]
    b = bucket(s, d, chain)
    allb[b] += 1
    if not b.startswith(GEN): return
    key = b.split(':')[0] if b.startswith(('alloc', 'copies')) else 'generic'
    tot[key] += 1
    for s2, d2 in chain[1:]:
        if d2 in ('[unknown]',): continue
        b2 = bucket(s2, d2, chain)
        if not b2.startswith(GEN):
            attr[key][b2] += 1; fr[key][s2[:110]] += 1; return
    attr[key]['(no named caller)'] += 1
chain = []
for line in sys.stdin:
    line = line.rstrip('\n')
    if not line.strip(): continue
    if not line.startswith(('\t', ' ')):
        flush(chain); chain = []; continue
    m = re.match(r'\s*([0-9a-f]+)\s+(.*)\s+\((.*)\)\s*$', line)
    if m:
        sym = re.sub(r'\+0x[0-9a-f]+$', '', m.group(2))
        chain.append((sym, m.group(3) if m.group(3).startswith('[') else m.group(3).split('/')[-1]))
flush(chain)
print(f'samples: {alls}')
for b, c in allb.most_common(): print(f'  {c:6d} {100*c/alls:5.1f}% {b}')
for k in tot:
    print(f'\n== {k}: {tot[k]} samples ({100*tot[k]/alls:.1f}% of all), by first named caller')
    for b, c in attr[k].most_common(12): print(f'  {c:5d} {100*c/tot[k]:5.1f}% {b}')
    print('  top caller frames:')
    for s, c in fr[k].most_common(10): print(f'    {c:5d} {s}')
