#!/usr/bin/env python3
# h2cell.py NAME CMD... -- url rounds [m]: server + h2load -t2 -c50 -m10 3 s, prints req/s, server CPU/req, machine CPU/req
import os, sys, subprocess, time, signal, re
args = sys.argv[1:]
sep = args.index('--')
name, cmd = args[0], args[1:sep]
url = args[sep+1]; rounds = int(args[sep+2]); m = args[sep+3] if len(args) > sep+3 else '10'
HZ = os.sysconf('SC_CLK_TCK')
p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
time.sleep(0.8)
def pids():
    out = []
    for d in os.listdir('/proc'):
        if d.isdigit():
            try:
                st = open(f'/proc/{d}/stat').read(); f = st[st.rindex(')')+2:].split()
                if int(f[2]) == p.pid or int(d) == p.pid: out.append(d)
            except Exception: pass
    return out
def cpu():
    t = 0
    for d in pids():
        try:
            st = open(f'/proc/{d}/stat').read(); f = st[st.rindex(')')+2:].split()
            t += int(f[11]) + int(f[12])
        except Exception: pass
    return t / HZ
def total():
    f = list(map(int, open('/proc/stat').readline().split()[1:]))
    return (sum(f) - f[3] - f[4]) / HZ
for r in range(rounds):
    t0 = total(); c0 = cpu()
    out = subprocess.run(['h2load', '-t2', '-c50', '-m', m, '-D', '3', '--warm-up-time', '1', url], capture_output=True, text=True).stdout
    c1 = cpu(); t1 = total()
    reqs = int(re.search(r'requests: (\d+) total', out).group(1))
    rps = float(re.search(r'finished in [\d.]+s, ([\d.]+) req/s', out).group(1))
    # cpu measured over warm-up too: scale by done requests incl warmup unknown; use rps*4s approx
    n = rps * 4
    print(f'{name:18} {url.rsplit("/",1)[1]:9} {rps:10.1f} req/s  {1e6*(c1-c0)/n:9.1f} us CPU/req  {1e6*(t1-t0)/n:9.1f} us all/req', flush=True)
os.killpg(p.pid, signal.SIGTERM); p.wait()
