//===- MLAAttrs.td - The mla dialect's attributes -------------------------===//
#ifndef MLA_ATTRS_TD
#define MLA_ATTRS_TD

include "mla/Dialect/MLA/IR/MLABase.td"

/// A double-precision field of an attribute, written as a float literal
/// and left out of the printed form when it equals `default`. (APFloat, not
/// `double`: attribute storage must be hashable.)
class MLA_F64Parameter<string desc, string default>
    : APFloatParameter<desc> {
  let parser = [{ ::mlir::mla::parseF64Field($_parser) }];
  let printer = [{ $_printer.printFloat($_self) }];
  let defaultValue = "::llvm::APFloat(" # default # ")";
}

def MLA_RopeTableAttr : AttrDef<MLA_Dialect, "RopeTable"> {
  let mnemonic = "rope_table";
  let summary = "how a rotary cos/sin table argument is computed";
  let description = [{
    Describes the `[max_position, rope]` f32 cos/sin table that a function
    argument carrying `mla.rope_table` holds: row `p` is `cos(p * f_i)` for
    `i < rope / 2` followed by `sin(p * f_i)`, both times `m`, with the
    frequencies `f_i` of Hugging Face DeepSeek's rotary embedding:

    - without scaling (`factor = 1`): `f_i = theta^(-2i / rope)` and `m = 1`;
    - YaRN (`factor > 1`, DeepSeek's `DeepseekV2YarnRotaryEmbedding`):
      `f_i` blends the extrapolated `theta^(-2i / rope)` and the
      interpolated `theta^(-2i / rope) / factor` with a linear ramp between
      the correction dimensions of `beta_fast` and `beta_slow` rotations
      over `original_max_position` positions, and
      `m = yarn_mscale(factor, mscale) / yarn_mscale(factor, mscale_all_dim)`
      with `yarn_mscale(s, x) = 0.1 * x * ln(s) + 1`.

    The compiler does not read the table's values; it records this
    attribute in the artifact so that a runner that is not given the table
    (`mla-run`, `mlart::ropeCosSinTable`) fills the one the model expects.
    Fields equal to their defaults are not printed:

    ```mlir
    #mla.rope_table<theta = 1.000000e+04>
    #mla.rope_table<factor = 4.000000e+01, original_max_position = 4096,
                    mscale = 7.070000e-01, mscale_all_dim = 7.070000e-01>
    ```
  }];
  let parameters = (ins
      MLA_F64Parameter<"rotary base (`rope_theta`)", "10000.0">:$theta,
      MLA_F64Parameter<"YaRN scaling factor; 1 means no scaling", "1.0">:$factor,
      DefaultValuedParameter<"int64_t", "0",
          "the context length YaRN extends (`original_max_position_embeddings`)">
          :$original_max_position,
      MLA_F64Parameter<"YaRN `beta_fast` (rotations)", "32.0">:$beta_fast,
      MLA_F64Parameter<"YaRN `beta_slow` (rotations)", "1.0">:$beta_slow,
      MLA_F64Parameter<"YaRN `mscale`", "1.0">:$mscale,
      MLA_F64Parameter<"YaRN `mscale_all_dim`", "0.0">:$mscale_all_dim);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif // MLA_ATTRS_TD
