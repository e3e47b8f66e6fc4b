// Operator families without a file of their own in the registry's list:
// each lives in its own file under ops/ and registers through here.
#include "tessel/ops/registry.h"

namespace tessel {

void register_rnn_ops(OpRegistry& r);       // rnn.cpp: RNN, GRU, LSTM
void register_quantize_ops(OpRegistry& r);  // quantize.cpp: (De)QuantizeLinear, DynamicQuantizeLinear
void register_string_ops(OpRegistry& r);    // string_ops.cpp: StringConcat/Split/Normalizer, RegexFullMatch
void register_text_ops(OpRegistry& r);      // text.cpp: TfIdfVectorizer
void register_signal_ops(OpRegistry& r);    // signal.cpp: DFT, STFT, windows, MelWeightMatrix
void register_random_ops(OpRegistry& r);    // random.cpp: Random*, Bernoulli, Multinomial
void register_image_decoder_ops(OpRegistry& r);  // image_decoder.cpp: ImageDecoder

void register_misc_ops(OpRegistry& r) {
  register_rnn_ops(r);
  register_quantize_ops(r);
  register_string_ops(r);
  register_text_ops(r);
  register_signal_ops(r);
  register_random_ops(r);
  register_image_decoder_ops(r);
}

}  // namespace tessel
