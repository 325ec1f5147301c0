def forward(x):
    return x * 3
