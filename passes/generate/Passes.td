//===- Passes.td - passes that build generation programs -----*- tablegen -*-===//

#ifndef TAILOR_PASSES_GENERATE_PASSES_TD
#define TAILOR_PASSES_GENERATE_PASSES_TD

include "mlir/Pass/PassBase.td"

def BuildDecodePass : Pass<"tailor-build-decode", "::mlir::ModuleOp"> {
  let summary = "a one-token decode step and a chunked prefill step with a "
                "KV cache, from the forward graph";
  let description = [{
    Turns the raised `forward` function, imported with seq = max_seq_len
    (so rotary tables and learned positions cover every position), into
    `decode(input_ids: [B, 1] i64, position: [] i64) -> logits [B, 1, V]`:
    one new token at `position` of every sequence of the batch.

    - Positions: tailor-pack-sequences (run here) turns the positions
      0..N-1 the export baked in into run-time gathers at a `position_ids`
      input, which becomes `position` broadcast to [B, 1]: rotary rows and
      learned position embeddings are read at the token's position.
    - Each tg.attention gets a key and a value cache (`tg.state` of kind
      `key_cache` / `value_cache`, [B, Hkv, N, D], kept across calls in the
      plan's kv_cache arena); the token's keys and values are written at
      `position` (`tg.cache_write`) and the query attends over the whole
      cache with the keys after `position` (and, with a sliding window,
      those `window` or more before it) masked by an additive bias built
      from `position` at run time.
    - Every other op is cloned with the sequence dim N of its results
      set to 1, the axis followed from input_ids through the graph.

    With `prefill-chunk` C > 1 (clamped to N) it also builds
    `prefill(prefill_input_ids: [B, C] i64, prefill_position: [] i64,
    prefill_last: [] i64) -> prefill_logits [B, 1, V]`: C prompt tokens at
    positions start..start+C-1 (rotary rows at start + iota(C), clamped to
    N - 1), their keys and values written into the same caches (rows at or
    past N dropped: only a padded tail chunk reaches them), each query row
    masked by its own position (and window) with a [1, 1, C, N] bias, and
    the logits of row `prefill_last` only: that row is gathered at the
    earliest point after the last attention where one value alone carries
    the sequence, so the final norm and lm_head run once per sequence.

    Fails, naming the op, for attention left unraised ("attention not
    raised in layer K"), attention that is not causal or already has a
    bias, and ops that mix positions (a reduction or slice along the
    sequence).
  }];
  let options = [
    Option<"eosTokenIds", "eos-token-ids", "std::string", /*default=*/"\"\"",
           "comma-separated ids that end generation (recorded for the plan)">,
    Option<"prefillChunk", "prefill-chunk", "int64_t", /*default=*/"0",
           "prompt tokens per call of a `prefill` step (clamped to the "
           "cache length; 0 or 1: no prefill step, the prompt runs through "
           "decode a token at a time)">
  ];
  let dependentDialects = ["::tailor::tg::TGDialect",
                           "::mlir::arith::ArithDialect"];
}

#endif // TAILOR_PASSES_GENERATE_PASSES_TD
