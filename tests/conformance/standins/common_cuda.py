"""Stand-in for ``torch.testing._internal.common_cuda``: no GPU."""

TEST_CUDA = False
TEST_MULTIGPU = False
TEST_CUDNN = False
