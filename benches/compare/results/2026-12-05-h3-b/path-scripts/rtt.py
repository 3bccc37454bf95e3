# RTT check (no ping binary here): UDP echo in ns srv is not needed; time TCP connects to staticd.
import socket, sys, time, statistics
ts=[]
for _ in range(int(sys.argv[2]) if len(sys.argv)>2 else 5):
    s=socket.socket(); t=time.perf_counter(); s.connect((sys.argv[1],8443)); ts.append((time.perf_counter()-t)*1000); s.close(); time.sleep(0.2)
print("tcp connect RTTs ms:", " ".join(f"{x:.2f}" for x in ts), "median", f"{statistics.median(ts):.2f}")
