# Counts the CPUID instructions a process executes, by library and function:
# a breakpoint on every cpuid in the executable and each library it loads.
# CPUID traps to the hypervisor on a VM, so on one these dominate process start.
#   ARGS="--inetd --root DIR --log-format off" gdb -q -batch -x benches/inetd_start/cpuid_count.py BINARY
# (stdin is /tmp/req.txt: a request, e.g. GET /1000.bin HTTP/1.1 ...).
import gdb, subprocess, re, collections
counts = collections.Counter()
done = set()
def offsets(path):
    out = subprocess.run(['objdump','-d','--no-show-raw-insn',path],capture_output=True,text=True).stdout
    res=[]; fn='?'
    for line in out.splitlines():
        m = re.match(r'^[0-9a-f]+ <(.*)>:', line)
        if m: fn = m.group(1); continue
        m = re.match(r'^\s*([0-9a-f]+):\s+cpuid', line)
        if m: res.append((int(m.group(1),16), fn))
    return res
class B(gdb.Breakpoint):
    def __init__(self, addr, label):
        super().__init__('*0x%x' % addr, internal=True); self.label = label
    def stop(self):
        eax = int(gdb.parse_and_eval('$eax')) & 0xffffffff
        counts[(self.label, hex(eax))] += 1
        return False
def arm():
    maps = gdb.execute('info proc mappings', to_string=True)
    bases = {}
    for line in maps.splitlines():
        p = line.split()
        if len(p) >= 6 and p[-1].startswith('/') and int(p[3],16) == 0 and p[-1] not in bases:
            bases[p[-1]] = int(p[0],16)
    for path, base in bases.items():
        if path in done: continue
        done.add(path)
        # non-PIE executables have absolute addresses
        et = subprocess.run(['readelf','-h',path],capture_output=True,text=True).stdout
        b = 0 if 'EXEC (' in et else base
        for off, fn in offsets(path):
            B(b + off, path.split('/')[-1] + ':' + fn)
gdb.execute('set pagination off')
gdb.execute('set confirm off')
import os; gdb.execute('starti ' + os.environ.get('ARGS','') + ' < /tmp/req.txt > /dev/null')
arm()
gdb.execute('set stop-on-solib-events 1')
while True:
    try:
        gdb.execute('continue', to_string=True)
    except gdb.error:
        break
    if not gdb.selected_inferior().pid: break
    arm()
tot = 0
for (label, eax), n in sorted(counts.items()):
    print('%4d  %s  leaf %s' % (n, label, eax)); tot += n
print('total', tot)
