# problem: 5_matmul
# style: Triton tutorial 8's grouped GEMM: the product split into a group of GEMMs (row blocks of A, views, each times B, into row blocks of C), the host builds device tables of data_ptr() addresses, sizes and leading dimensions with torch.tensor([...], device=...), and the persistent kernel loads each address from its table and casts it with tl.pointer_type before loading and storing through it
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def grouped_matmul_kernel(
    # device tensors of matrix addresses (int64), one per GEMM of the group
    group_a_ptrs,
    group_b_ptrs,
    group_c_ptrs,
    # device tensor of GEMM sizes, (group_size, 3): <M, N, K> of each GEMM
    group_gemm_sizes,
    # device tensor of leading dimensions, (group_size, 3): <lda, ldb, ldc> of each GEMM
    g_lds,
    # number of GEMMs
    group_size,
    # number of programs the grid launches (the tutorial's virtual SMs)
    NUM_SM: tl.constexpr,
    # tile sizes
    BLOCK_SIZE_M: tl.constexpr,
    BLOCK_SIZE_N: tl.constexpr,
    BLOCK_SIZE_K: tl.constexpr,
):
    tile_idx = tl.program_id(0)
    last_problem_end = 0
    for g in range(group_size):
        gm = tl.load(group_gemm_sizes + g * 3)
        gn = tl.load(group_gemm_sizes + g * 3 + 1)
        gk = tl.load(group_gemm_sizes + g * 3 + 2)
        num_m_tiles = tl.cdiv(gm, BLOCK_SIZE_M)
        num_n_tiles = tl.cdiv(gn, BLOCK_SIZE_N)
        num_tiles = num_m_tiles * num_n_tiles
        # the tiles of this GEMM, NUM_SM apart
        while tile_idx >= last_problem_end and tile_idx < last_problem_end + num_tiles:
            lda = tl.load(g_lds + g * 3)
            ldb = tl.load(g_lds + g * 3 + 1)
            ldc = tl.load(g_lds + g * 3 + 2)
            a_ptr = tl.load(group_a_ptrs + g).to(tl.pointer_type(tl.float32))
            b_ptr = tl.load(group_b_ptrs + g).to(tl.pointer_type(tl.float32))
            c_ptr = tl.load(group_c_ptrs + g).to(tl.pointer_type(tl.float32))
            tile_idx_in_gemm = tile_idx - last_problem_end
            tile_m_idx = tile_idx_in_gemm // num_n_tiles
            tile_n_idx = tile_idx_in_gemm % num_n_tiles
            offs_am = tile_m_idx * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
            offs_bn = tile_n_idx * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
            offs_k = tl.arange(0, BLOCK_SIZE_K)
            a_ptrs = a_ptr + offs_am[:, None] * lda + offs_k[None, :]  # (BLOCK_SIZE_M, BLOCK_SIZE_K)
            b_ptrs = b_ptr + offs_k[:, None] * ldb + offs_bn[None, :]  # (BLOCK_SIZE_K, BLOCK_SIZE_N)
            accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
            for kk in range(0, tl.cdiv(gk, BLOCK_SIZE_K)):
                # masked, unlike the tutorial's full tiles: 5_matmul's sizes are not multiples of the blocks
                k_left = gk - kk * BLOCK_SIZE_K
                a = tl.load(a_ptrs, mask=(offs_am[:, None] < gm) & (offs_k[None, :] < k_left), other=0.0)
                b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_bn[None, :] < gn), other=0.0)
                accumulator = tl.dot(a, b, accumulator, input_precision="ieee")
                a_ptrs += BLOCK_SIZE_K
                b_ptrs += BLOCK_SIZE_K * ldb
            offs_cm = tile_m_idx * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
            offs_cn = tile_n_idx * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
            c_ptrs = c_ptr + ldc * offs_cm[:, None] + offs_cn[None, :]
            tl.store(c_ptrs, accumulator, mask=(offs_cm[:, None] < gm) & (offs_cn[None, :] < gn))
            tile_idx += NUM_SM
        last_problem_end = last_problem_end + num_tiles


def group_gemm_fn(group_A, group_B, group_C):
    """C_i = A_i @ B_i for each GEMM of the group, in one launch (the tutorial's host code)."""
    a_addrs, b_addrs, c_addrs, g_sizes, g_lds = [], [], [], [], []
    for A, B, C in zip(group_A, group_B, group_C):
        M, K = A.shape
        K, N = B.shape
        a_addrs.append(A.data_ptr())
        b_addrs.append(B.data_ptr())
        c_addrs.append(C.data_ptr())
        g_sizes += [M, N, K]
        g_lds += [A.stride(0), B.stride(0), C.stride(0)]
    device = group_A[0].device
    # device tensors, as the tutorial makes them
    d_a_ptrs = torch.tensor(a_addrs, device=device)
    d_b_ptrs = torch.tensor(b_addrs, device=device)
    d_c_ptrs = torch.tensor(c_addrs, device=device)
    d_g_sizes = torch.tensor(g_sizes, dtype=torch.int32, device=device)
    d_g_lds = torch.tensor(g_lds, dtype=torch.int32, device=device)
    # a fixed number of programs, each walking the group's tiles NUM_SM apart
    grouped_matmul_kernel[(4,)](d_a_ptrs, d_b_ptrs, d_c_ptrs, d_g_sizes, d_g_lds, len(group_A),
                                NUM_SM=4, BLOCK_SIZE_M=32, BLOCK_SIZE_N=32, BLOCK_SIZE_K=32)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        M, N = a.shape[0], b.shape[1]
        c = torch.empty((M, N), device=a.device, dtype=a.dtype)
        # the group: four row blocks of A (views), each times all of B, into C's row blocks
        rows = triton.cdiv(M, 4)
        starts = range(0, M, rows)
        group_A = [a[s:s + rows] for s in starts]
        group_C = [c[s:s + rows] for s in starts]
        group_gemm_fn(group_A, [b] * len(group_A), group_C)
        return c
