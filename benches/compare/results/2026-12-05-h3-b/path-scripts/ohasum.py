# oha JSON -> per-connection figures: request times (s), first byte (s), goodput from size/time
import json,sys
d=json.load(sys.stdin); s=d["summary"]; r=d["latencyPercentiles"]; fb=d["firstBytePercentiles"]; de=d["details"]
sz=s["sizePerRequest"] or 0
print(f"success {s['successRate']} status {d['statusCodeDistribution']} errors {d['errorDistribution']} size/req {sz}")
print(f"request time s: fastest {s['fastest']:.3f} p50 {r['p50']:.3f} slowest {s['slowest']:.3f}; first byte s: fastest {de['firstByte']['fastest']:.4f} p50 {fb['p50']:.4f} slowest {de['firstByte']['slowest']:.4f}; dialup(handshake) s {de['DNSDialup']['average']:.4f}")
print(f"goodput Mbit/s: max {sz*8/s['fastest']/1e6:.1f} median {sz*8/r['p50']/1e6:.1f} min {sz*8/s['slowest']/1e6:.1f}")
