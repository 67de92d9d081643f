"""attnviz's own transformer: one layout that every family's weights are mapped into, and one forward over it.

A family (bert.py, modernbert.py, deberta.py, gpt2.py, llama.py and the Llama-like ones, neox.py, phi.py, bloom.py,
opt.py, gemma.py, gpt_oss.py; gguf.py reads a GGUF file into any of them) is a mapping of a checkpoint into `Weights`,
never a second engine. What differs between families is said by `Architecture` and `LayerWeights`: where the norms sit,
LayerNorm or RMSNorm, learned, rotary or no positions (ALiBi, DeBERTa's relative terms), GELU or a gated SiLU or a
mixture of experts, how many key/value heads the query heads share, sliding windows, soft caps, learned sinks,
norms of each head's query and key, attention and MLP side by side.

The package, by what each module holds:
- `layout`: Architecture, Norm, LayerWeights, Weights; what a run keeps (Trace, Forward); the seam that changes a run
  (Intervention).
- `rules`: the rules a family adds, one owner each (Keys: causal, window; Alibi; Relative; SoftCap; Sink): how each
  applies, its LaTeX, its note for the pages, its part in "Why here?".
- `attend`: the attention contract (`attention`): scores, shaped, the keys a query may read, the softmax (with a
  learned sink) and αV, by three strategies: attnviz.functional's `grouped_attend`, `causal_attend` (blocks of queries
  against their keys so far) and `explicit_attend` (scores written out), which a layer asks through `Whole`. The scan's
  `Blocked` (attnviz.models.scan) is the other way through a layer's attention; its C kernel and the browser's
  weights.mjs are mirrors.
- `one_layer`: the embedding, the projections, and the one body of a layer (`layer`): its attention by a strategy
  (`Whole` or the scan's `Blocked`), the intervention entering once, and the rest of the layer.
- `running`: the layers over a text (`forward`), several texts at once (`batch_weights`), one more piece from the
  K/V cache (`extend`), the logits.
- `notes`: one sentence for each mechanism that changes what a picture of the attention means.

Matrices are kept as (in, out): y = xW + b, as in our notes; nn.Linear's (out, in) are transposed once, at load.
"""

from attnviz._deprecated import warn
from attnviz.models.engine.layout import (  # noqa: F401
    ACTIVATIONS, Architecture, rms, Norm, FrozenNorm, LayerWeights, Weights, Trace, Intervention, Forward, output_matrices,
)
from attnviz.models.engine import rules  # noqa: F401
from attnviz.models.engine.attend import (  # noqa: F401
    attention, allowed_keys, shaped, alibi_slopes, shaped_parts, relative_parts, scorer, CAUSAL_BLOCK, causal_attend, sunk_softmax, explicit_attend, relative, relative_index, relative_terms, Whole, WHOLE, grouped_values, scores, heads_of, of_head,
)
from attnviz.models.engine.one_layer import (  # noqa: F401
    split_heads, embed, project, attention_input, turned, feed_forward, mlp, mixture, layer, rest_of_layer, normed, after_attention, rest_in_rows, REST_ROWS,
)
from attnviz.models.engine.running import (  # noqa: F401
    run_layers, through, forward, host_buffer, to_host, copied, batch_weights, logits, unembed, extend,
)
from attnviz.models.engine.notes import (  # noqa: F401
    layers_named, notes,
)


def __getattr__(name: str):
    if name == "Block":  # renamed: "block" now means consecutive pieces only (docs/development.md)
        warn("attnviz.models.engine.Block", "attnviz.models.engine.LayerWeights")
        return LayerWeights
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
