// invocation_order.wgsl — testing only: which role (the local index the kernel computes
// with) each invocation of a workgroup takes. Not a kernel on its own; the kernel tables put
// it in front of every kernel that shares workgroup memory across a barrier (fused_coop,
// fused_tiled, fused_portable, decode_workgroup, merge, the unfused softmax, coop_ops_probe),
// which call invocation_role() instead of using local_invocation_index as it is.
//
// Why: lavapipe runs a workgroup's invocations in their order from one barrier to the next,
// a SIMD batch of 8 at a time (16 at 512 bits), each batch in lockstep. A missing barrier
// between two invocations then breaks a result there only if the one that must wait comes
// first, and never between two of one batch; on a GPU it is a race either way. The host
// writes INVOCATION_ORDER in per pipeline where WGPU_ATTENTION_INVOCATION_ORDER asks for
// another order (crate::switches), and `.ci/run` runs the kernels in all four: 0 as
// numbered; 1 backwards, so that each pair in different batches also runs the other way
// round; 2 interleaved, role r taken by invocation (r % (wg / 8)) * 8 +
// r / (wg / 8), so that the roles of one batch of 8 run in eight different batches, lowest
// first; 3 both, the highest first. So at 8 lanes every pair of roles runs in different
// batches both ways round. Every order gives the same results to a kernel without such a
// race, and costs nothing once the constant folds.

const INVOCATION_ORDER: u32 = 0u;

// The role of invocation `i` of a workgroup of `wg` invocations (a multiple of 64).
fn invocation_role(i: u32, wg: u32) -> u32 {
    let interleaved = (i % 8u) * (wg / 8u) + i / 8u;
    switch INVOCATION_ORDER {
        case 1u: {
            return wg - 1u - i;
        }
        case 2u: {
            return interleaved;
        }
        case 3u: {
            return wg - 1u - interleaved;
        }
        default: {
            return i;
        }
    }
}
