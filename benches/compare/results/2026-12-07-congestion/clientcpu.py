import subprocess, re, sys, os
HZ=os.sysconf('SC_CLK_TCK')
def total():
    f=list(map(int,open('/proc/stat').readline().split()[1:])); return (sum(f)-f[3]-f[4])/HZ
def pcpu(pid):
    st=open(f'/proc/{pid}/stat').read(); f=st[st.rindex(')')+2:].split(); return (int(f[11])+int(f[12]))/HZ
def srvcpu(name):
    t=0
    for p in subprocess.run(['pgrep','-x',name],capture_output=True,text=True).stdout.split():
        t+=pcpu(p)
    return t
def soft():
    t=0
    for p in subprocess.run(['pgrep','ksoftirqd'],capture_output=True,text=True).stdout.split(): t+=pcpu(p)
    return t
for name,url in [(a.split('=')[0],a.split('=')[1]) for a in sys.argv[1:]]:
    t0,s0,k0=total(),srvcpu(name),soft()
    r=subprocess.run(['/usr/bin/time','-f','%U %S','h2load','-t2','-c50','-m10','-D4',url],capture_output=True,text=True)
    t1,s1,k1=total(),srvcpu(name),soft()
    n=int(re.search(r'(\d+) succeeded',r.stdout).group(1)); u,s=map(float,r.stderr.strip().split('\n')[-1].split())
    print(f'{name:14} {n/4:8.0f} req/s  server {1e6*(s1-s0)/n:6.1f}  client {1e6*(u+s)/n:6.1f} (user {1e6*u/n:5.1f})  ksoftirqd {1e6*(k1-k0)/n:5.1f}  machine {1e6*(t1-t0)/n:6.1f} us/req')
