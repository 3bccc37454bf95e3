import json,sys
d=json.load(open(sys.argv[1]))
peers=['nginx','lighttpd','apache2','h2o','caddy','static-web-server']
def size(n):
    return {1:'1 B',1000:'1 KB',10000:'10 KB',100000:'100 KB',1000000:'1 MB',10000000:'10 MB'}.get(n,str(n))
rows={}
for s in d['summaries']:
    k=(s['tool'],s.get('https'),s['connections'],s['mode'],s['size'],s.get('streams'),s.get('h2c'))
    rows.setdefault(k,{})[s['server']]=s
def fmt(x): return f"{x:,.0f}"
print("cell                           staticd         best peer                      ratio")
for k in sorted(rows, key=lambda k:(k[0]!='wrk',bool(k[1]),k[3]!='keep-alive',k[2],k[4])):
    r=rows[k]; st=r.get('staticd')
    if not st: continue
    best=max((p for p in peers if p in r), key=lambda p:r[p]['requests_per_second']['median'], default=None)
    if not best: continue
    m=st['requests_per_second']; spread=max(m['max']-m['median'], m['median']-m['min'])/m['median']*100
    sp=f"±{spread:.1f}%" if spread<10 else f"±{spread:.0f}%"
    if k[0]=='wrk': cell=f"{'https ' if k[1] else ''}{k[3]} {k[2]}"
    elif k[0]=='h2load': cell=('h2 ' if k[1] else 'h2c') + f" {k[2]}x{k[5]}"
    elif k[0]=='tls-resume': cell='https resumed'
    else: continue
    b=r[best]['requests_per_second']['median']
    print(f"{cell:18} {size(k[4]):>7} {fmt(m['median']):>13} {sp:7} {best:17} {fmt(b):>10}   {m['median']/b:.2f}")
