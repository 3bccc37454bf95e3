import re, collections, sys
def load(f):
    d = {}
    for line in open(f):
        if line.startswith('## '): break
        m = re.match(r'\s*(\d+)\s+([\d.]+)%\s+(.*)$', line)
        if m: d[m.group(3)] = int(m.group(1))
    return d
def load_attr(f):
    # {'alloc': {bucket: n}, 'copies': ..., 'generic': ...}
    a = collections.defaultdict(dict); cur = None
    for line in open(f):
        m = re.match(r'== (\w+): (\d+) samples', line)
        if m: cur = m.group(1); continue
        if line.startswith('  top caller'): cur = None; continue
        m = re.match(r'\s+(\d+)\s+([\d.]+)% (.*)$', line)
        if cur and m: a[cur][m.group(3)] = int(m.group(1))
    return a
GROUPS = [
 ('kernel', 'kernel: sendmsg (UDP tx + loopback delivery)', ['kernel: syscall sendmsg']),
 ('kernel', 'kernel: recvmmsg (UDP rx)', ['kernel: syscall recvmmsg']),
 ('kernel', 'kernel: writev (TCP tx + loopback delivery)', ['kernel: syscall writev']),
 ('kernel', 'kernel: read (TCP rx)', ['kernel: syscall read']),
 ('kernel', 'kernel: pread64 (file reads)', ['kernel: syscall pread64']),
 ('kernel', 'kernel: epoll_wait', ['kernel: syscall epoll_wait']),
 ('kernel', 'kernel: futex + eventfd write (thread wake-ups)', ['kernel: syscall futex', 'kernel: syscall write']),
 ('kernel', 'kernel: reschedule/irq/other syscalls', ['kernel: reschedule on syscall/irq return', 'kernel: no syscall (irq/softirq/sched on interrupt)', 'kernel: syscall x64_sys_call', 'kernel: syscall newfstatat', 'kernel: syscall openat2', 'kernel: syscall madvise', 'kernel: syscall close']),
 ('alloc', 'allocation: malloc/free/realloc', ['alloc: malloc/free/realloc']),
 ('copies', 'copies: memmove/memcpy', ['copies: memmove/memcpy/memset']),
 ('crypto', 'crypto: AES-GCM + header protection (aws-lc, rustls quic/tls13 wrappers, quinn_proto key glue)', ['crypto: aws-lc AEAD/HP + rustls quic PacketKey wrappers', 'quinn_proto: crypto glue (key/HP plumbing)']),
 ('qp', 'quinn_proto: packet build/parse, frames, conn other', ['quinn_proto: packets/frames/conn other']),
 ('qp', 'quinn_proto: ACK/loss/congestion', ['quinn_proto: ACK/loss/congestion']),
 ('qp', 'quinn_proto: stream state', ['quinn_proto: stream state']),
 ('quinn', 'quinn:: async layer (endpoint/conn driver tasks, UDP poll) + tracing spans', ['quinn (async: endpoint/conn drivers, udp)', 'tracing (spans around quinn drivers)']),
 ('h3', 'h3: QPACK (Huffman string encode/decode, static table)', ['h3: qpack']),
 ('h3', 'h3: frames/streams/send_response', ['h3: frames/streams']),
 ('h3', 'h3: other (connection, error polling)', ['h3: other (connection, request stream)']),
 ('httpb', 'http:: / bytes:: (HeaderMap, Uri, Bytes)', ['http:: / bytes::']),
 ('tokio', 'tokio: scheduler/tasks/wakers', ['tokio: scheduler/tasks/wakers']),
 ('tokio', 'tokio: sync (Notify, mpsc, AtomicWaker)', ['tokio: sync (notify/mpsc/wakers)']),
 ('tokio', 'tokio: timers', ['tokio: timers']),
 ('tokio', 'tokio: net/io driver', ['tokio: net/io driver']),
 ('rustls', 'rustls (non-crypto: records, buffers)', ['rustls (non-crypto)']),
 ('ng', 'nghttp2 (framing, HPACK)', ['nghttp2']),
 ('sd', 'staticd: serve::h3 (request/stream tasks, quic trait glue, response_head)', ['staticd: serve::h3 glue']),
 ('sd', 'staticd: h2session + serve::h2', ['staticd: h2 session/driver']),
 ('sd', 'staticd: TCP/TLS transport (event loop, wire, tls glue)', ['staticd: transport (event loop/TLS glue)']),
 ('sd', 'staticd: core (fields, pipeline, site, respond, log)', ['staticd: core (pipeline/site/fields/log)']),
 ('time', 'clock_gettime (vDSO)', ['vdso clock_gettime']),
 ('other', 'other: generic Rust monomorphs (hashbrown, BinaryHeap, from_utf8, sip), libc/libm misc, unknown', ['generic Rust (hashbrown/alloc/core/std, inlined monomorphs)', 'libc/libm other', 'unknown']),
]
def table(cols):
    # cols: list of (title, buckets dict, us_per_req, attr)
    print('| bucket | ' + ' | '.join(f'{t} % | {t} µs/req' for t, *_ in cols) + ' |')
    print('|---|' + '---:|---:|' * len(cols))
    seen = set()
    for cat, name, keys in GROUPS:
        vals = []
        nonzero = False
        for t, d, us, _ in cols:
            tot = sum(d.values()); v = sum(d.get(k, 0) for k in keys)
            seen.update(keys)
            if v: nonzero = True
            vals.append(f'{100*v/tot:.1f} | {us*v/tot:.2f}')
        if nonzero: print(f'| {name} | ' + ' | '.join(vals) + ' |')
    for t, d, us, _ in cols:
        miss = [k for k in d if k not in seen]
        if miss: print('MISSING', t, miss, file=sys.stderr)
    print('| **total** | ' + ' | '.join(f'100 | {us:.2f}' for t, d, us, _ in cols) + ' |')

def redistribute(d, a):
    d = dict(d)
    m = {'alloc': 'alloc: malloc/free/realloc', 'copies': 'copies: memmove/memcpy/memset', 'generic': 'generic Rust (hashbrown/alloc/core/std, inlined monomorphs)'}
    for k, bname in m.items():
        if k not in a or bname not in d: continue
        selfn = d[bname]; tot = sum(a[k].values())
        moved = 0
        for b, n in a[k].items():
            if b == '(no named caller)': continue
            add = selfn * n / tot; d[b] = d.get(b, 0) + add; moved += add
        d[bname] = selfn - moved
    return d
