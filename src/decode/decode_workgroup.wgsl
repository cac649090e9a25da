// decode_workgroup.wgsl — split-K attention for few query rows over many keys, the form for
// GPUs (flash-decoding). One workgroup of 64 invocations takes one split of the keys for one
// (batch, kv head) group and a tile of up to 16 of that group's query rows; it writes a
// normalised partial output and its log-sum-exp per row, which merge.wgsl combines, as for
// decode_partial.wgsl (the form for CPU adapters, one invocation per split).
//
// Why a second form: decode_partial.wgsl gives each invocation a split of keys to run alone
// (on GPUs, until this form, Lk/128 keys), which suits lavapipe (one CPU thread runs a whole workgroup in SIMD
// lanes) but leaves a GPU nearly empty: B1 Hq32 Hkv8 Lq1 Lk4096 D128 is 1024 invocations,
// and on an H200 it read K and V at 14.6 GB/s where a copy kernel moved 969
// (docs/h200.md). Here the 64 invocations of a workgroup share each block of 64 keys:
// invocation t scores key j0 + t against every row of the tile (its own K row, staged
// through workgroup memory a chunk of columns at a time, the next chunk, or the next
// block's first, loaded while one is used: STAGE_K), the block's softmax statistics are
// computed by 4 to 16 invocations a row, and then each invocation owns one vec4 column of the
// output (of one or more rows, or of every row over a share of the keys: V_BY_KEYS),
// reading V rows whole across the workgroup (consecutive invocations, consecutive
// addresses). On an H200 (docs/h200.md, 2026-12-04), with each invocation reading its K row
// from storage itself, it read f32 K and V at 1.35 TB/s, f16 ones slower, and PyTorch f16
// at 3.15; since 2026-12-06 K is staged (STAGE_K), the output loop issues its V loads in
// batches (LOAD_BATCH) and its sets share out the keys (V_BY_KEYS), none yet measured
// there. On lavapipe it is
// about ten times slower than decode_partial.wgsl, which is why CPU adapters keep that form
// (crate::decode::Form::for_adapter).
//
// Bindings (group 0), the parameter struct, the overrides D, DV, CAUSAL, HAS_BIAS,
// HAS_ALLOW and masked(): in decode_common.wgsl, which the kernel table puts in front.
//   0 params, 1 q, 4 bias, 5 allow, 6 part_o (groups, splits, rows, Dv), 7 part_l
//   2 k, 3 v : windows of k (B, Hkv, kv_rows, D) and v (B, Hkv, kv_rows, Dv), read through load_k()
//              and load_v() (kv_loads_f32/f16/bf16.wgsl, which the kernel table puts in
//              front), staged K through k_word() (kstage_f32.wgsl or kstage_packed.wgsl)
//            (kv_rows: Lk, or a KvCache's capacity; key j of kv head h is row h x kv_rows + j)
//
// Rows of a group: the (Hq / Hkv) * Lq query rows whose heads read this kv head, row
// r = (head within group) * Lq + i, as in decode_partial.wgsl. Tile t holds rows
// t * ROWS .. t * ROWS + ROWS - 1 (the last tile's surplus slots repeat the last row and are
// not written).
//
// Specialisation: D, DV (multiples of 4, up to the host's limit crate::decode::
// WORKGROUP_MAX_WIDTH: no array here is sized by them), CAUSAL, HAS_BIAS, HAS_ALLOW
// (decode_common.wgsl), COLS (output columns per invocation, DV/4 over 64 rounded up),
// ROWS (rows per tile, 1..16 / COLS), LOAD_BATCH (loads issued together) and STAGE_K (K
// through workgroup memory), all chosen by the host (crate::decode).
//
// Output columns: with DV/4 <= 64 the workgroup holds 64 / (DV/4) sets of DV/4 invocations,
// invocation t of a set owning vec4 column t of the output. With V_BY_KEYS (1) the sets
// share out the block's keys (set s takes keys s, s + sets, ..) and each invocation sums
// its column of every row of the tile over its keys; at the end of the split the sets'
// sums are added through workgroup memory. With V_BY_KEYS 0 they share out the rows
// instead (set s takes rows s, s + sets, ..) over all of the block's keys, so that every
// set loads every key's V row. Above DV/4 = 64 there is one set and each invocation owns
// COLS columns (t, t + 64, ..) of every row of the tile, so the tile's rows are at most
// MAX_ROWS / COLS (the accumulator holds MAX_ROWS vec4s).
//
// Workgroup memory: 4 KiB of scores and weights (16 rows x 65 floats), three 16-float
// arrays, one of 64 floats and 9 KiB of staged K (64 rows x 9 vec4; f16 and bf16 K 8.5
// KiB, 64 rows x 17 packed words), 13.5 KiB in all, within WebGPU's default limit of 16 KiB.
//
// Dispatch: one workgroup per (group, tile, split), numbered linearly (split fastest), spread
// over x and y; surplus workgroups return at once (whole workgroups, so the barriers stay in
// uniform control flow). Each workgroup runs the keys of its split in blocks of 64 (crate::
// decode chooses how many blocks a split takes); under an allow mask only the blocks
// within the tile's rows' allowed span (below).

override ROWS: u32 = 16u;
override COLS: u32 = 1u;
// Loads issued together (1 to MAX_BATCH; the host's crate::decode::load_batch, 8 on GPUs,
// 16 for 16-bit K/V, whose loads are half as wide, where one load at a time left the loops
// waiting on each): the output loop's keys' V,
// and where K is not staged (STAGE_K 0) the score loop's vec4 columns of a key's row.
// MAX_BATCH sizes the batch's array: the largest batch here, and in each pipeline's source
// its LOAD_BATCH (crate::decode::workgroup_array_sizes).
override LOAD_BATCH: u32 = 8u;
const MAX_BATCH: u32 = 16u;
// 1: the score phase reads K through workgroup memory (kstage), CHUNK vec4 columns of the
// block's 64 key rows at a time, which CHUNK consecutive invocations load from consecutive
// addresses (a subgroup of 32 reads whole 128-byte runs of rows with one load: four rows
// of 8 f32 words, or two of 16 packed f16/bf16 ones), and then each invocation reads its
// own key's columns from there. The staged word, CHUNK and how a word widens come from
// kstage_f32.wgsl or kstage_packed.wgsl, which the kernel table puts in front. 0: each invocation reads
// its key's row from storage itself, so that one load of a subgroup touches 32 rows' cache
// lines, each of which is fetched again for the next columns unless it is still cached
// (the kernel before 2026-12-06). The host's crate::decode::stage_k: 1 on GPUs.
override STAGE_K: u32 = 1u;
// 1: the invocation sets of the output loop split the block's keys between them, 0: its
// rows (Output columns, above). Split by keys, a set's chain of V loads is 1 / sets as
// long (at Dv 128, 32 keys in 4 batches of 8 rather than 64 in 8) and no V row is loaded
// twice; each invocation then sums every row of the tile, and the split ends by adding the
// sets' sums (in rounds of SUM_ROWS rows through kstage). The host's
// crate::decode::v_by_keys: 1 by default; 0 is the kernel before 2026-12-06.
override V_BY_KEYS: u32 = 1u;
// Words between staged key rows: one more than a chunk, so that invocations reading rows
// t.. of one column fall in different banks.
const CHUNK_STRIDE: u32 = CHUNK + 1u;
// Key rows one pass of the workgroup over a chunk stages (CHUNK invocations a row).
const STAGE_ROWS: u32 = WG / CHUNK;
// Rows of the sets' sums kstage holds at once at the end of a split (one vec4 an invocation
// a row, in SUM_WORDS words): 9 with f32 K, 8 with packed.
const SUM_ROWS: u32 = KEYS * CHUNK_STRIDE / (WG * SUM_WORDS);

// Invocations per workgroup, and keys per block (one key each in the score phase).
const WG: u32 = 64u;
const KEYS: u32 = 64u;
// Most rows in a tile (ROWS at most this): the size of the per-row arrays.
const MAX_ROWS: u32 = 16u;
// Floats between the rows of `block`: one more than a row, so that where invocations read
// one key of several rows (the output loop), the rows fall in different banks of workgroup
// memory (with a stride of 64 all of them would fall in one bank on GPUs with 32 banks).
const STRIDE: u32 = KEYS + 1u;
// Most invocations that share a row's keys in the statistics step (stat_lanes in main).
const MAX_STAT_LANES: u32 = 16u;

// The block's scores of row r against key j0 + t at r * STRIDE + t, turned into weights in
// place by the statistics step.
var<workgroup> block: array<f32, MAX_ROWS * STRIDE>;
// Per row: how much the output so far shrinks for this block (exp(m_old - m_new)), and at
// the end the row's sum of weights, for the invocations that write its columns.
var<workgroup> row_alpha: array<f32, MAX_ROWS>;
var<workgroup> row_sum: array<f32, MAX_ROWS>;
// The statistics step's per-invocation maxima of their keys; at the end of the split their
// shares of the rows' sums.
var<workgroup> lane_part: array<f32, WG>;
// At the end of the split, each row's running maximum.
var<workgroup> row_max: array<f32, MAX_ROWS>;
// With STAGE_K: columns c0 .. c0 + CHUNK of the block's key rows, row x at x * CHUNK_STRIDE,
// a word a column (9 KiB f32, 8.5 KiB packed).
var<workgroup> kstage: array<KWord, KEYS * CHUNK_STRIDE>;

// This invocation's share of chunk `ch` (vec4 columns ch * CHUNK ..) of the key rows of
// the block from j0, into `staged`: column ch * CHUNK + t % CHUNK of key rows
// j0 + t / CHUNK + i * STAGE_ROWS (rows past the last key repeat it, as in the unstaged
// loop; columns past D/4 are 0).
fn load_k_chunk(staged: ptr<function, array<KWord, CHUNK>>, k_row0: u32, j0: u32,
                ch: u32, t: u32) {
    let d4 = D / 4u;
    let c = ch * CHUNK + t % CHUNK;
    for (var i = 0u; i < CHUNK; i = i + 1u) {
        let j = min(j0 + t / CHUNK + i * STAGE_ROWS, p.lk - 1u);
        var kc = KWord();
        if (c < d4) {
            kc = k_word((k_row0 + j) * d4 - p.k_win + c);
        }
        (*staged)[i] = kc;
    }
}

// Adds the dot products of the tile's rows of q (at q_at) with column c of a key's row, kc,
// to the rows' scores s.
fn add_dots(s: ptr<function, array<f32, MAX_ROWS>>, q_at: ptr<function, array<u32, MAX_ROWS>>,
            c: u32, kc: vec4<f32>) {
    for (var r = 0u; r < MAX_ROWS; r = r + 1u) {
        if (r < ROWS) {
            (*s)[r] = (*s)[r] + dot(q[(*q_at)[r] + c], kc);
        }
    }
}

// Adds the weight of key x of the block times its value vx (output column c of this
// invocation) to the accumulators of the invocation's rows (r0, r0 + r_step, ..).
fn add_value(acc: ptr<function, array<vec4<f32>, MAX_ROWS>>, c: u32, r0: u32,
             r_step: u32, x: u32, vx: vec4<f32>) {
    for (var n = 0u; n < MAX_ROWS; n = n + 1u) {
        let r = r0 + n * r_step;
        if (r < ROWS) {
            let a = min(c * ROWS + n, MAX_ROWS - 1u);
            (*acc)[a] = (*acc)[a] + block[r * STRIDE + x] * vx;
        }
    }
}

@compute @workgroup_size(64, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) local_index: u32) {
    // The role this invocation takes: its index, but in CI's runs in other orders
    // (shaders/invocation_order.wgsl).
    let t = invocation_role(local_index, 64u);
    let wg = wid.x + wid.y * nwg.x;
    // Uniform across the workgroup: every barrier below stays in uniform control flow.
    if (wg >= p.total) {
        return;
    }
    let split = wg % p.splits;
    let tile = (wg / p.splits) % p.tiles;
    let gl = wg / (p.splits * p.tiles); // group within the chunk
    let g = p.g0 + gl;                   // absolute (batch, kv head) group = b * Hkv + kvh
    let b = g / p.hkv;
    let kvh = g % p.hkv;
    let d4 = D / 4u;
    let dv4 = DV / 4u;

    // The tile's rows: query batch-head, position, and where its q row starts.
    var bhs: array<u32, MAX_ROWS>;
    var pos: array<u32, MAX_ROWS>;
    var q_at: array<u32, MAX_ROWS>;
    var last_pos = 0u;
    for (var r = 0u; r < MAX_ROWS; r = r + 1u) {
        if (r < ROWS) {
            let row = min(tile * ROWS + r, p.rows - 1u);
            bhs[r] = b * p.hq + kvh * p.group + row / p.lq;
            pos[r] = row % p.lq;
            q_at[r] = (bhs[r] * p.lq + pos[r]) * d4 - p.q_win;
            last_pos = max(last_pos, pos[r]);
        }
    }

    // This split's keys; under the causal rule none past the last key any row here may see.
    var j_begin = split * p.keys_per_split;
    var j_end = min(j_begin + p.keys_per_split, p.lk);
    if (CAUSAL != 0u) {
        j_end = min(j_end, u32(clamp(i32(last_pos) + p.causal_offset + 1, 0, i32(p.lk))));
    }
    // Under an allow mask, only the keys from the first any row of the tile may see to the
    // last (each allow row's header, mask.wgsl): every other key is masked for every row
    // and would add weight 0, so a padded sequence's split past its end runs no block. The
    // bounds come from read-only storage at workgroup-uniform indices, so they are uniform
    // and the barriers in the loop stay in uniform control flow. Blocks may start anywhere:
    // masked() reads each key's bit on its own.
    if (HAS_ALLOW != 0u) {
        var first = p.lk;
        var end = 0u;
        for (var r = 0u; r < MAX_ROWS; r = r + 1u) {
            if (r < ROWS) {
                let at = allow_span_index(p.mask, bhs[r] / p.hq, bhs[r] % p.hq, pos[r]);
                first = min(first, allow[at]);
                end = max(end, allow[at + 1u]);
            }
        }
        j_begin = max(j_begin, first);
        j_end = min(j_end, end);
    }
    let k_row0 = (b * p.hkv + kvh) * p.kv_rows;

    // Output columns: with COLS = 1, invocation t owns column t % dv4 in set t / dv4
    // (set_index) of `sets` (how many times dv4 fits in the workgroup; invocations from
    // sets * dv4 on idle there). Its rows are r0, r0 + r_step, .. and its keys of a block
    // x0, x0 + x_step, ..: split by keys (V_BY_KEYS), every row and keys set_index,
    // set_index + sets, ..; else rows set_index, set_index + sets, .. and every key. With
    // COLS > 1 (dv4 > 64, so sets is 1 and set_index 0), columns t + c * 64 (c < COLS,
    // those below dv4) of every row; the accumulator of column c of row slot n (row
    // r0 + n * r_step) is acc[c * ROWS + n].
    let sets = max(WG / max(dv4, 1u), 1u);
    let col = t % max(dv4, 1u);
    let set_index = t / max(dv4, 1u);
    let by_keys = V_BY_KEYS != 0u && sets > 1u && dv4 > 0u;
    let r0 = select(set_index, 0u, by_keys);
    let r_step = select(sets, 1u, by_keys);
    let x0 = select(0u, set_index, by_keys);
    let x_step = select(1u, sets, by_keys);
    var acc: array<vec4<f32>, MAX_ROWS>;
    for (var r = 0u; r < MAX_ROWS; r = r + 1u) {
        acc[r] = vec4<f32>(0.0);
    }
    // The statistics step: stat_lanes invocations a row (16 for up to 4 rows, 8 for up to 8,
    // else 4), invocation t taking row stat_row's keys stat_lane, stat_lane + stat_lanes, ..
    // Each keeps its row's running max (the same in every lane of the row) and its own
    // share of the row's running sum, added up at the end of the split.
    let stat_lanes = select(select(MAX_STAT_LANES / 4u, MAX_STAT_LANES / 2u, ROWS <= 8u),
                            MAX_STAT_LANES, ROWS <= 4u);
    let stat_row = t / stat_lanes;
    let stat_lane = t % stat_lanes;
    let stat_keys = KEYS / stat_lanes;
    var m_run = NO_SCORE;
    var l_run = 0.0;
    // With STAGE_K, this invocation's share of the next chunk of K on its way to kstage. The
    // first block's first chunk is loaded here; each later block's during the block before
    // (after that block's last chunk went to kstage), so that its latency passes under that
    // block's dot products, softmax and V loads rather than at the start of its own.
    let chunks = (d4 + CHUNK - 1u) / CHUNK;
    var staged: array<KWord, CHUNK>;
    if (STAGE_K != 0u && j_begin < j_end) {
        load_k_chunk(&staged, k_row0, j_begin, 0u, t);
    }

    for (var j0 = j_begin; j0 < j_end; j0 = j0 + KEYS) {
        // Scores: invocation t against key j0 + t, every row of the tile.
        let j = j0 + t;
        var s: array<f32, MAX_ROWS>;
        for (var r = 0u; r < MAX_ROWS; r = r + 1u) {
            s[r] = 0.0;
        }
        if (STAGE_K != 0u) {
            // Chunk by chunk through kstage; the next chunk's loads (after the last chunk,
            // the next block's first) are issued before this one's dot products, so they are
            // in flight while those run.
            for (var ch = 0u; ch < chunks; ch = ch + 1u) {
                // Every invocation has read the last chunk out of kstage (before the first,
                // the last block's barriers saw to it).
                if (ch > 0u) {
                    workgroupBarrier();
                }
                for (var i = 0u; i < CHUNK; i = i + 1u) {
                    kstage[(t / CHUNK + i * STAGE_ROWS) * CHUNK_STRIDE + t % CHUNK] = staged[i];
                }
                workgroupBarrier();
                if (ch + 1u < chunks) {
                    load_k_chunk(&staged, k_row0, j0, ch + 1u, t);
                } else if (j0 + KEYS < j_end) {
                    load_k_chunk(&staged, k_row0, j0 + KEYS, 0u, t);
                }
                let c0 = ch * CHUNK;
                for (var u = 0u; u < CHUNK; u = u + 1u) {
                    if (c0 + u < d4) {
                        add_dots(&s, &q_at, c0 + u, k_values(kstage[t * CHUNK_STRIDE + u]));
                    }
                }
            }
        } else {
            // LOAD_BATCH vec4 columns of the key's row at a time: their loads first, then
            // their dot products (as the output loop below does with V).
            let k_at = (k_row0 + min(j, p.lk - 1u)) * d4 - p.k_win;
            var c = 0u;
            for (; c + LOAD_BATCH <= d4; c = c + LOAD_BATCH) {
                var batch: array<vec4<f32>, MAX_BATCH>;
                for (var u = 0u; u < MAX_BATCH; u = u + 1u) {
                    if (u < LOAD_BATCH) {
                        batch[u] = load_k(k_at + c + u);
                    }
                }
                for (var u = 0u; u < MAX_BATCH; u = u + 1u) {
                    if (u < LOAD_BATCH) {
                        add_dots(&s, &q_at, c + u, batch[u]);
                    }
                }
            }
            for (; c < d4; c = c + 1u) {
                add_dots(&s, &q_at, c, load_k(k_at + c));
            }
        }
        for (var r = 0u; r < MAX_ROWS; r = r + 1u) {
            if (r < ROWS) {
                var score = NO_SCORE;
                if (j < j_end) {
                    score = masked(p.scale * s[r], bhs[r], pos[r], j);
                }
                block[r * STRIDE + t] = score;
            }
        }
        workgroupBarrier();

        // Statistics, stat_lanes invocations a row: the maximum of each one's keys, then
        // the row's (through lane_part), which moves the running max; then each turns its
        // keys' scores into weights exp(s - max) (0 where masked) and adds them to its
        // share of the row's sum. Until 2026-12-06 one invocation a row did all 64 keys in
        // turn (128 steps a block, the rest of the workgroup waiting at the barrier).
        if (stat_row < ROWS) {
            var top = NO_SCORE;
            for (var i = 0u; i < stat_keys; i = i + 1u) {
                top = max(top, block[stat_row * STRIDE + stat_lane + i * stat_lanes]);
            }
            lane_part[t] = top;
        }
        workgroupBarrier();
        if (stat_row < ROWS) {
            var top = m_run;
            for (var l = 0u; l < stat_lanes; l = l + 1u) {
                top = max(top, lane_part[stat_row * stat_lanes + l]);
            }
            let alpha = exp(m_run - top);
            var total = 0.0;
            for (var i = 0u; i < stat_keys; i = i + 1u) {
                let at = stat_row * STRIDE + stat_lane + i * stat_lanes;
                let sc = block[at];
                let w = select(0.0, exp(sc - top), sc > VALID);
                block[at] = w;
                total = total + w;
            }
            l_run = l_run * alpha + total;
            m_run = top;
            if (stat_lane == 0u) {
                row_alpha[stat_row] = alpha;
            }
        }
        workgroupBarrier();

        // Output: each invocation's column, for its rows, over its keys of the block.
        if (set_index < sets && dv4 > 0u) {
            for (var c = 0u; c < COLS; c = c + 1u) {
                for (var n = 0u; n < MAX_ROWS; n = n + 1u) {
                    let r = r0 + n * r_step;
                    if (r < ROWS) {
                        let a = min(c * ROWS + n, MAX_ROWS - 1u);
                        acc[a] = acc[a] * row_alpha[r];
                    }
                }
            }
            let keys = min(KEYS, j_end - j0);
            let v_row0 = (k_row0 + j0) * dv4 - p.v_win;
            for (var c = 0u; c < COLS; c = c + 1u) {
                let column = col + c * WG;
                if (column < dv4) {
                    // LOAD_BATCH keys at a time: their loads first, independent of each other,
                    // then their multiply-adds, so that a batch's loads are in flight
                    // together rather than each waiting for the last one's use.
                    var x = x0;
                    for (; x + (LOAD_BATCH - 1u) * x_step < keys; x = x + LOAD_BATCH * x_step) {
                        var batch: array<vec4<f32>, MAX_BATCH>;
                        for (var u = 0u; u < MAX_BATCH; u = u + 1u) {
                            if (u < LOAD_BATCH) {
                                batch[u] = load_v(v_row0 + (x + u * x_step) * dv4 + column);
                            }
                        }
                        for (var u = 0u; u < MAX_BATCH; u = u + 1u) {
                            if (u < LOAD_BATCH) {
                                add_value(&acc, c, r0, r_step, x + u * x_step, batch[u]);
                            }
                        }
                    }
                    for (; x < keys; x = x + x_step) {
                        add_value(&acc, c, r0, r_step, x, load_v(v_row0 + x * dv4 + column));
                    }
                }
            }
        }
        // The next block overwrites `block`, `row_alpha` and `lane_part`.
        workgroupBarrier();
    }

    // Each row's sum (its lanes' shares) and maximum.
    lane_part[t] = l_run;
    if (stat_row < ROWS && stat_lane == 0u) {
        row_max[stat_row] = m_run;
    }
    workgroupBarrier();
    // Partial output (normalised) and LSE of each real row of the tile.
    let slot = ((g - p.g0) * p.splits + split) * p.rows + tile * ROWS;
    if (t < ROWS) {
        var sum = 0.0;
        for (var l = 0u; l < stat_lanes; l = l + 1u) {
            sum = sum + lane_part[t * stat_lanes + l];
        }
        row_sum[t] = sum;
        if (tile * ROWS + t < p.rows) {
            var bits = NEG_INF_BITS;
            if (sum > 0.0) {
                bits = bitcast<u32>(row_max[t] + log(sum));
            }
            part_l[slot + t] = bits;
        }
    }
    workgroupBarrier();
    if (by_keys) {
        // The sets' sums of each row added through kstage (free since the last block's
        // barriers), SUM_ROWS rows a round: every invocation stores its sums of the round's
        // rows, then set r % sets adds the sets' sums of row r for its column and writes it.
        // `by_keys` depends only on constants, so the barriers stay in uniform control flow.
        for (var q0 = 0u; q0 < ROWS; q0 = q0 + SUM_ROWS) {
            for (var i = 0u; i < SUM_ROWS; i = i + 1u) {
                if (q0 + i < ROWS) {
                    put_sum(i * WG + t, acc[q0 + i]);
                }
            }
            workgroupBarrier();
            for (var i = 0u; i < SUM_ROWS; i = i + 1u) {
                let r = q0 + i;
                if (r < ROWS && set_index == r % sets && tile * ROWS + r < p.rows) {
                    var sum = vec4<f32>(0.0);
                    for (var s = 0u; s < sets; s = s + 1u) {
                        sum = sum + sum_at(i * WG + s * dv4 + col);
                    }
                    let l = row_sum[r];
                    part_o[(slot + r) * dv4 + col] = select(vec4<f32>(0.0), sum / l, l > 0.0);
                }
            }
            // The next round overwrites kstage.
            workgroupBarrier();
        }
    } else if (set_index < sets && dv4 > 0u) {
        for (var c = 0u; c < COLS; c = c + 1u) {
            let column = col + c * WG;
            for (var n = 0u; n < MAX_ROWS; n = n + 1u) {
                let r = r0 + n * r_step;
                if (r < ROWS && tile * ROWS + r < p.rows && column < dv4) {
                    let l = row_sum[r];
                    let a = min(c * ROWS + n, MAX_ROWS - 1u);
                    part_o[(slot + r) * dv4 + column] = select(vec4<f32>(0.0), acc[a] / l, l > 0.0);
                }
            }
        }
    }
}
