#include "lib/serve/triton_python_models.h"

namespace ftx::serve {

namespace {

// The part both model.py files share: imports and the tokenizer beside the file.
const char* const kHeader = R"PY(# Written by ftx triton-repo for Triton's Python backend. Needs numpy and the `tokenizers`
# library (pip install tokenizers) in the backend's Python environment.
import csv
import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils
from tokenizers import Tokenizer, decoders, models, pre_tokenizers

HERE = os.path.dirname(os.path.abspath(__file__))


def load_tokenizer():
    """The tokenizer files beside this file: GPT-2's vocab.json + merges.txt (byte-level BPE with
    GPT-2's pre-tokenizer, as its encoder.py runs them), else a HuggingFace tokenizer.json."""
    vocab, merges = os.path.join(HERE, "vocab.json"), os.path.join(HERE, "merges.txt")
    if os.path.exists(vocab) and os.path.exists(merges):
        tokenizer = Tokenizer(models.BPE.from_file(vocab, merges))
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tokenizer.decoder = decoders.ByteLevel()
        return tokenizer
    return Tokenizer.from_file(os.path.join(HERE, "tokenizer.json"))


def text_of(item):
    return item.decode("utf-8") if isinstance(item, bytes) else str(item)


def tensor(request, name):
    return pb_utils.get_input_tensor_by_name(request, name).as_numpy()

)PY";

const char* const kPreprocessing = R"PY(
class TritonPythonModel:
    """Text to ids: a request's rows are its batch; each row's first string is the text."""

    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.pad_id = int(config["parameters"]["pad_id"]["string_value"])
        self.tokenizer = load_tokenizer()

    def encode(self, text):
        """The ids of a prompt, with the tokenizer's special tokens (a BOS where its
        post-processor adds one), as transformers' tokenizer(text) gives them."""
        return self.tokenizer.encode(text).ids

    def word_list(self, rows):
        """FasterTransformer's stop/bad words format, [batch, 2, N] int32: each row's
        comma-separated words (CSV quoting allowed) as their ids end to end, then the cumulative
        end offset of each word; padded with 0 and -1."""
        ids, offsets = [], []
        for row in rows:
            fields = next(csv.reader([text_of(row[0])]), [])
            row_ids, row_offsets = [], []
            for word in fields:
                word_ids = self.tokenizer.encode(word, add_special_tokens=False).ids
                if word_ids:
                    row_ids += word_ids
                    row_offsets.append(len(row_ids))
            ids.append(row_ids)
            offsets.append(row_offsets)
        width = max([1] + [len(r) for r in ids])
        out = np.zeros((len(ids), 2, width), dtype=np.int32)
        out[:, 1, :] = -1
        for i, (row_ids, row_offsets) in enumerate(zip(ids, offsets)):
            out[i, 0, :len(row_ids)] = row_ids
            out[i, 1, :len(row_offsets)] = row_offsets
        return out

    def execute(self, requests):
        responses = []
        for request in requests:
            ids = [self.encode(text_of(row[0])) for row in tensor(request, "QUERY")]
            lengths = np.array([[len(r)] for r in ids], dtype=np.uint32)
            padded = np.full((len(ids), max([1] + [len(r) for r in ids])), self.pad_id, dtype=np.uint32)
            for i, r in enumerate(ids):
                padded[i, :len(r)] = r
            outputs = [
                pb_utils.Tensor("INPUT_ID", padded),
                pb_utils.Tensor("REQUEST_INPUT_LEN", lengths),
                pb_utils.Tensor("REQUEST_OUTPUT_LEN", tensor(request, "REQUEST_OUTPUT_LEN").astype(np.uint32)),
                pb_utils.Tensor("BAD_WORDS_IDS", self.word_list(tensor(request, "BAD_WORDS_DICT"))),
                pb_utils.Tensor("STOP_WORDS_IDS", self.word_list(tensor(request, "STOP_WORDS_DICT"))),
            ]
            responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
        return responses
)PY";

const char* const kPostprocessing = R"PY(
class TritonPythonModel:
    """Ids to text: TOKENS_BATCH [batch, beam, len] (the FT model's output_ids, prompt included)
    up to each beam's SEQUENCE_LENGTH, decoded without the tokenizer's special tokens."""

    def initialize(self, args):
        self.tokenizer = load_tokenizer()

    def execute(self, requests):
        responses = []
        for request in requests:
            tokens, lengths = tensor(request, "TOKENS_BATCH"), tensor(request, "SEQUENCE_LENGTH")
            texts = [[self.tokenizer.decode([int(t) for t in beam[:int(n)]]).encode("utf-8")
                      for beam, n in zip(beams, beam_lengths)]
                     for beams, beam_lengths in zip(tokens, lengths)]
            output = pb_utils.Tensor("OUTPUT", np.array(texts, dtype=object))
            responses.append(pb_utils.InferenceResponse(output_tensors=[output]))
        return responses
)PY";

}  // namespace

std::string preprocessing_model_py() { return std::string(kHeader) + kPreprocessing; }
std::string postprocessing_model_py() { return std::string(kHeader) + kPostprocessing; }

}  // namespace ftx::serve
