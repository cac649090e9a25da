// coop_ops_emulated.wgsl — coop_ops_16.wgsl's types and functions in scalar code, for
// adapters without cooperative matrices (lavapipe in CI): the same 16x16 blocks of the same
// f16 inputs, accumulated in f32, so that the whole of fused_coop.wgsl (staging, tiling,
// masks, softmax, the accumulators' rescaling, GQA, key passes) runs against the reference
// everywhere; only the cooperative instructions themselves are left to a GPU that has them.
//
// The lanes of a virtual subgroup of SG invocations (`lane` = index within it; the host runs
// the emulation with SG = 32 unless WGPU_ATTENTION_COOP_LANES says otherwise) share a block
// as a cooperative matrix would: lane l holds elements e = l + SG i, i < LANE_ELEMS =
// 256 / SG (row e / 16, column e % 16), reading and writing only its own elements of ss and
// of the output, so no lane waits for another. A left operand is not
// held: ATile is where its block starts in qs (Q) or ps (P), read when it is multiplied.

alias In = f16;
alias Acc = array<f32, LANE_ELEMS>;
alias ATile = u32;

fn to_in(x: vec4<f32>) -> vec4<In> {
    return vec4<In>(clamp(x, vec4<f32>(-65504.0), vec4<f32>(65504.0)));
}

fn acc_zero() -> Acc {
    return Acc();
}

fn load_q(r0: u32, d0: u32, lane: u32) -> ATile {
    return r0 * QS + d0;
}

fn add_qk(acc: Acc, qt: ATile, c0: u32, d0: u32, lane: u32) -> Acc {
    var out = acc;
    for (var i = 0u; i < LANE_ELEMS; i = i + 1u) {
        let e = lane + SG * i;
        let r = e / 16u;
        let c = c0 + e % 16u;
        var sum = out[i];
        for (var j = 0u; j < 16u; j = j + 1u) {
            sum = sum + f32(qs[qt + r * QS + j]) * f32(kvs[c * QS + d0 + j]);
        }
        out[i] = sum;
    }
    return out;
}

fn store_scores(acc: Acc, r0: u32, c0: u32, lane: u32) {
    for (var i = 0u; i < LANE_ELEMS; i = i + 1u) {
        let e = lane + SG * i;
        ss[(r0 + e / 16u) * SS + c0 + e % 16u] = acc[i];
    }
}

fn load_p(r0: u32, k0: u32, lane: u32) -> ATile {
    return r0 * PS + k0;
}

fn add_pv(acc: Acc, pt: ATile, k0: u32, c0: u32, lane: u32) -> Acc {
    var out = acc;
    for (var i = 0u; i < LANE_ELEMS; i = i + 1u) {
        let e = lane + SG * i;
        let r = e / 16u;
        let c = c0 + e % 16u;
        var sum = out[i];
        for (var j = 0u; j < 16u; j = j + 1u) {
            sum = sum + f32(ps[pt + r * PS + j]) * f32(kvs[(k0 + j) * QS + c]);
        }
        out[i] = sum;
    }
    return out;
}

fn acc_store(acc: Acc, at: u32, lane: u32) {
    for (var i = 0u; i < LANE_ELEMS; i = i + 1u) {
        ss[at + lane + SG * i] = acc[i];
    }
}

fn acc_load(at: u32, lane: u32) -> Acc {
    var out = Acc();
    for (var i = 0u; i < LANE_ELEMS; i = i + 1u) {
        out[i] = ss[at + lane + SG * i];
    }
    return out;
}
