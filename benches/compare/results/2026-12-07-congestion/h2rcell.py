#!/usr/bin/env python3
# h2rcell.py NAME CMD... -- url : h2load -t2 -c50 -m10, 1 s warm-up, 3 s; req/s, server CPU us/req
# CPU: utime+stime of every process in the server's process group (it is started as a session
# leader), over the whole h2load run (warm-up included), per request done.
import os, sys, subprocess, time, signal, re
args = sys.argv[1:]; sep = args.index('--')
name, cmd, url = args[0], args[1:sep], args[sep+1]
HZ = os.sysconf('SC_CLK_TCK')
p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
time.sleep(0.8)
def cpu():
    t = 0
    for d in os.listdir('/proc'):
        if not d.isdigit(): continue
        try:
            st = open(f'/proc/{d}/stat').read(); f = st[st.rindex(')')+2:].split()
            if int(f[3]) == p.pid: t += int(f[11]) + int(f[12])
        except Exception: pass
    return t / HZ
def total():
    f = list(map(int, open('/proc/stat').readline().split()[1:])); return (sum(f) - f[3] - f[4]) / HZ
c0, t0 = cpu(), total()
out = subprocess.run(['h2load', '-t2', '-c50', '-m10', '-D3', '--warm-up-time=1', url], capture_output=True, text=True).stdout
c1, t1 = cpu(), total()
m = re.search(r'finished in [\d.]+s, ([\d.]+) req/s', out); reqs = int(re.search(r'requests: \d+ total, \d+ started, (\d+) done', out).group(1))
print(f'{name:14} {url.rsplit("/",1)[1]:9} {float(m.group(1)):10.1f} req/s {1e6*(c1-c0)/reqs:9.1f} us server CPU/req {1e6*(t1-t0)/reqs:9.1f} machine', flush=True)
os.killpg(p.pid, signal.SIGTERM); p.wait()
