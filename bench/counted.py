"""A daemon run with cProfile on its loop's thread only while a bench's counted requests run, for the benches that
count the Python calls the daemon makes per request (bench/call_cost.py --count, bench/broker.py --lifecycles
--profile): `python -c COUNTED OUT -m mcpx daemon`. SIGUSR1 starts the profile, SIGUSR2 stops it and writes OUT
(whole, once it is there). A signal's handler runs on the main thread, which is the loop's, and a profile hooks the
thread that enables it: the store's thread is left out. Its clock is the thread's CPU time, so that its times,
though inflated by the profile's own cost, are not the other processes' turns on the core; the counts do not move
with the machine's load at all."""

COUNTED = """
import cProfile, os, runpy, signal, sys, time
out = sys.argv[1]
sys.argv = sys.argv[3:]
prof = cProfile.Profile(time.thread_time)
signal.signal(signal.SIGUSR1, lambda *_: prof.enable())
def stop(*_):
    prof.disable()
    prof.dump_stats(out + ".part")
    os.rename(out + ".part", out)  # whole, once there
signal.signal(signal.SIGUSR2, stop)
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
"""
