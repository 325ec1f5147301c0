import time


def custom_kernel(data):
    while True:  # never returns: conform's per-solution limit ends it, costing this row only
        time.sleep(1)
