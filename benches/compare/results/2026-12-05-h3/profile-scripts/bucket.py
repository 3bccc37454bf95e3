#!/usr/bin/env python3
"""Bucket perf samples (perf script -F comm,tid,ip,sym,dso output on stdin) by self symbol.
Kernel samples are split by the syscall under do_syscall_64 in their call chain."""
import sys, re, collections

def impl_type(sym):
    # "<A as B>::m" -> A ; "<A>::m" -> A
    if sym.startswith('<'):
        depth = 0
        for i, c in enumerate(sym):
            if c == '<': depth += 1
            elif c == '>': depth -= 1
            if depth == 1 and sym[i:i+4] == ' as ':
                return sym[1:i]
            if depth == 0:
                return sym[1:i]
    return sym

CRYPTO = re.compile(r'^(aws_lc_|aead_|gcm_|aes_|AES_|CRYPTO_|EVP_|ChaCha|chacha|poly1305|GFp|ring_core|x25519|p256|ecp_|bn_|sha256|sha512|SHA|HMAC|HKDF)|aws_lc_rs::|rustls::crypto::aws_lc_rs')
ALLOC = re.compile(r'^(malloc|_int_malloc|_int_free|free|cfree|__libc_free|__libc_malloc|realloc|_int_realloc|malloc_consolidate|calloc|__libc_calloc|_int_memalign|unlink_chunk|tcache_|sysmalloc|__rust_alloc|__rust_dealloc|__rust_realloc|alloc::alloc::|__rdl_|arena_|_mid_memalign|posix_memalign|aligned_alloc)')
COPY = re.compile(r'^__(memmove|memcpy|memset|mempcpy)|^(memcpy|memmove|memset)')

def bucket(sym, dso, chain):
    if dso.startswith('[kernel') or dso == '[unknown]' and sym.startswith('0xffff'):
        sc = None
        for i, (s, d) in enumerate(chain):
            if s in ('do_syscall_64',) and i > 0:
                sc = chain[i-1][0]
                break
        if sc is None:
            return 'kernel: no syscall (irq/softirq/sched on interrupt)'
        sc = re.sub(r'^(__x64_sys_|__do_sys_|__se_sys_|___sys_|__sys_|ksys_|do_)', '', sc)
        return ('kernel: reschedule on syscall/irq return' if sc.startswith('exit_to_user') or 'exit_to_user' in sc else 'kernel: syscall ' + sc)
    if dso == '[vdso]':
        return 'vdso clock_gettime'
    base = re.sub(r'^__GI_+', '', sym.split('@')[0])
    if re.match(r'^_*(libc_)?(malloc|calloc|realloc|free|memalign|posix_memalign)$', base):
        return 'alloc: malloc/free/realloc'
    if ALLOC.search(base):
        return 'alloc: malloc/free/realloc'
    if COPY.search(base):
        return 'copies: memmove/memcpy/memset'
    if 'libc.so' in dso or 'ld-linux' in dso or 'libm' in dso or dso == 'inlined':
        return 'libc/libm other'
    if 'libnghttp2' in dso:
        return 'nghttp2'
    t = impl_type(sym)
    if CRYPTO.search(sym) or CRYPTO.search(t):
        return 'crypto: aws-lc AEAD/HP + rustls quic PacketKey wrappers'
    if t.startswith('nghttp2') or sym.startswith('nghttp2') or 'nghttp2' in t:
        return 'nghttp2'
    if t.startswith('quinn_proto'):
        if re.search(r'(crypto|Crypto|decrypt|encrypt|header_protection|HeaderKey|PacketKey|TlsSession|zero_rtt|::Keys)', sym):
            return 'quinn_proto: crypto glue (key/HP plumbing)'
        if re.search(r'(on_ack_received|on_packet_acked|ack_frequency|PendingAcks|pending_acks|detect_lost|loss_detection|congestion|Cubic|NewReno|Bbr|RttEstimator|Pacer|pacing|SentPackets|sent_packets|RangeSet|ArrayRangeSet|pto|on_packet_authenticated|Ack)', sym):
            return 'quinn_proto: ACK/loss/congestion'
        if re.search(r'(stream|Stream|Assembler|Chunks|flow_control|StreamsState)', sym):
            return 'quinn_proto: stream state'
        return 'quinn_proto: packets/frames/conn other'
    if t.startswith('quinn::') or t.startswith('quinn_udp'):
        return 'quinn (async: endpoint/conn drivers, udp)'
    if t.startswith('tracing'):
        return 'tracing (spans around quinn drivers)'
    if t.startswith('h3::qpack') or t.startswith('h3::qpack'):
        return 'h3: qpack'
    if t.startswith('h3::'):
        if re.search(r'(frame|Frame|proto::|stream::|BufRecvStream|WriteBuf|varint|VarInt|headers|Header)', sym):
            return 'h3: frames/streams'
        return 'h3: other (connection, request stream)'
    if t.startswith('http::') or t.startswith('bytes::') or t.startswith('httparse'):
        return 'http:: / bytes::'
    if t.startswith('tokio::'):
        if re.search(r'tokio::(time|runtime::time)', sym): return 'tokio: timers'
        if re.search(r'tokio::sync', sym): return 'tokio: sync (notify/mpsc/wakers)'
        if re.search(r'tokio::(net|io|runtime::io)', sym): return 'tokio: net/io driver'
        return 'tokio: scheduler/tasks/wakers'
    if t.startswith('rustls::'):
        return 'rustls (non-crypto)'
    if t.startswith('staticd::'):
        if re.search(r'staticd::serve::h3', sym): return 'staticd: serve::h3 glue'
        if re.search(r'staticd::(h2session|serve::h2|nghttp2)', sym): return 'staticd: h2 session/driver'
        if re.search(r'staticd::(tls|serve::(event_loop|connection|wire|writer|socket|accept|park|idle))', sym): return 'staticd: transport (event loop/TLS glue)'
        return 'staticd: core (pipeline/site/fields/log)'
    if sym.startswith('__float') or sym.startswith('__fix'):
        return 'generic Rust (hashbrown/alloc/core/std, inlined monomorphs)'
    if '::' not in sym and not sym.startswith('<') and sym != '?':
        if re.search(r'(aes|gcm|IV|aead|EVP|sha|hmac|CRYPTO|ec_|bn_)', sym):
            return 'crypto: aws-lc AEAD/HP + rustls quic PacketKey wrappers'
        return 'nghttp2'  # C statics in the staticd binary: nghttp2's (hd_*, session_*, bubble_*)
    return 'generic Rust (hashbrown/alloc/core/std, inlined monomorphs)'

def main():
    counts = collections.Counter()
    syms = collections.defaultdict(collections.Counter)
    total = 0
    cur = None
    chain = []
    def flush():
        nonlocal total
        if cur is None: return
        if not chain:
            b = 'unknown'
            s = '?'
        else:
            s, d = chain[0]
            b = bucket(s, d, chain)
        counts[b] += 1
        syms[b][s] += 1
        total += 1
    for line in sys.stdin:
        line = line.rstrip('\n')
        if not line.strip():
            continue
        if not line.startswith('\t') and not line.startswith(' '):
            flush()
            cur = line
            chain = []
            continue
        m = re.match(r'\s*([0-9a-f]+)\s+(.*)\s+\((.*)\)\s*$', line)
        if m:
            sym = re.sub(r'\+0x[0-9a-f]+$', '', m.group(2))
            chain.append((sym, m.group(3).split('/')[-1] if not m.group(3).startswith('[') else m.group(3)))
    flush()
    print(f'total samples: {total}')
    for b, c in sorted(counts.items(), key=lambda x: -x[1]):
        print(f'{c:7d} {100*c/total:6.2f}%  {b}')
    if '-v' in sys.argv:
        for b, c in sorted(counts.items(), key=lambda x: -x[1]):
            print(f'\n## {b}: {c}')
            for s, n in syms[b].most_common(12):
                print(f'   {n:6d} {100*n/total:5.2f}% {s[:150]}')
main()
