#!/usr/bin/env python3
# cell.py NAME CMD... -- url conns secs : starts the server, runs wrk, prints req/s and server CPU us/req
import os, sys, subprocess, time, signal, re
args = sys.argv[1:]
sep = args.index('--')
name, cmd = args[0], args[1:sep]
url, conns, secs = args[sep+1], args[sep+2], args[sep+3]
rounds = int(args[sep+4]) if len(args) > sep+4 else 1
HZ = os.sysconf('SC_CLK_TCK')
p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
time.sleep(0.8)
def pids():
    out = []
    for d in os.listdir('/proc'):
        if d.isdigit():
            try:
                st = open(f'/proc/{d}/stat').read()
                f = st[st.rindex(')')+2:].split()
                if int(f[2]) == p.pid or int(d) == p.pid:  # pgrp
                    out.append(d)
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
subprocess.run(['wrk', '-t2', '-c', conns, '-d', '1', url], capture_output=True)
def total():
    f = open('/proc/stat').readline().split()[1:]
    f = list(map(int, f))
    return (sum(f) - f[3] - f[4]) / HZ
for r in range(rounds):
    t0 = total()
    c0 = cpu()
    out = subprocess.run(['wrk', '-t2', '-c', conns, '-d', secs] + (['-H', 'Connection: close'] if os.environ.get('CLOSE') else []) + [url], capture_output=True, text=True).stdout
    c1 = cpu()
    t1 = total()
    reqs = int(re.search(r'(\d+) requests in', out).group(1))
    rps = float(re.search(r'Requests/sec:\s+([\d.]+)', out).group(1))
    print(f'{name:14} {url.rsplit("/",1)[1]:9} c={conns:5} {rps:10.1f} req/s  {1e6*(c1-c0)/max(reqs,1):9.1f} us CPU/req  {1e6*(t1-t0)/max(reqs,1):9.1f} us all/req', flush=True)
os.killpg(p.pid, signal.SIGTERM); p.wait()
