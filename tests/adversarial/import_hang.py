"""Cheat (time): hangs forever while it is imported (no compiler running). With --timeout 5 the
judge must give up after about 5 s with "timed out", not wait for the build limit (900 s)."""
import time

while True:
    time.sleep(1)


def custom_kernel(data):
    return data[-1]
