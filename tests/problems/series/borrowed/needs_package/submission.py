import nosuchpkg_conform  # a third-party package this machine does not have (as helion's submissions import helion)


def custom_kernel(data):
    return nosuchpkg_conform.transpose_and_sum(data)
