// Which fixture models the browser and Node tests run (folders under tests/fixtures).

/** Every architecture's forward (hidden states and attentions too) against reference.safetensors. */
export const FORWARD_FIXTURES = ['bert/BertModel', 'bert/BertForMaskedLM', 'bert/BertForPreTraining', 'bert/BertForNextSentencePrediction',
  'bert/BertForSequenceClassification', 'bert/BertForTokenClassification', 'bert/BertForQuestionAnswering',
  'gpt2/GPT2Model', 'gpt2/GPT2LMHeadModel', 'gpt2/GPT2ForSequenceClassification',
  // The LM saved by transformers in three shards (model.safetensors.index.json).
  'gpt2/GPT2LMHeadModel-sharded', 'openai-gpt/OpenAIGPTModel', 'openai-gpt/OpenAIGPTLMHeadModel',
  // One model per encoder family: RoBERTa's positions, XLM-R's and BERT's [batch, choices, seq] ids,
  // DistilBERT's computed sinusoidal positions, ALBERT's shared layers, ERNIE's task types, ELECTRA's projection,
  // XLM-RoBERTa-XL's pre-LN layers.
  'roberta/RobertaForMaskedLM', 'xlm-roberta/XLMRobertaForMultipleChoice', 'distilbert/DistilBertModel', 'albert/AlbertForPreTraining',
  'ernie/ErnieModel', 'electra/ElectraForPreTraining', 'bert/BertForMultipleChoice', 'xlm-roberta-xl/XLMRobertaXLForSequenceClassification',
  // CoVe's MT-LSTM (a biLSTM over GloVe vectors), converted in place by `sesame convert-cove`;
  // CVT's tagger (char_ids in inputs.json: each token's characters).
  'cove/tiny', 'cvt/tiny'];

// Pipeline cases: [folder, task, cases file (a list, or an object of lists by task)].

export const CLASSIFICATION_CASES = [
  ['bert/BertForSequenceClassification', 'text-classification', 'pipeline.json'], ['gpt2/GPT2ForSequenceClassification', 'text-classification', 'pipeline.json'],
  ['bert/BertForNextSentencePrediction', 'next-sentence-prediction', 'pipeline.json'], ['bert/BertForPreTraining', 'next-sentence-prediction', 'pipeline.json'],
  ['bert/BertForTokenClassification', 'token-classification', 'pipeline.json'], ['bert/BertForQuestionAnswering', 'question-answering', 'pipeline.json'],
];

/** One model per encoder family: fill-mask with <mask>, zero-shot, multiple choice, sentence order. */
export const ENCODER_FAMILY_CASES = [
  ['roberta/RobertaForMaskedLM', 'fill-mask', 'pipeline.json'], ['albert/AlbertForMaskedLM', 'fill-mask', 'pipeline.json'],
  ['roberta/RobertaForSequenceClassification', 'zero-shot-classification', 'pipeline.json'], ['roberta/RobertaForSequenceClassification', 'text-classification', 'pipeline.json'],
  ['distilbert/DistilBertForMultipleChoice', 'multiple-choice', 'pipeline.json'], ['electra/ElectraForMultipleChoice', 'multiple-choice', 'pipeline.json'],
  ['albert/AlbertForPreTraining', 'next-sentence-prediction', 'pipeline.json'],
];

/** The recurrent families: ULMFiT's classifier and CoVe's vectors, converted in place from
 * fastai's and the MT-LSTM's state dicts (tests/reference/make_recurrent_pipeline_fixtures.py),
 * and CVT's tagger (tests/reference/make_cvt_fixtures.py). */
export const RECURRENT_CASES = [
  ['awd_lstm/fastai-classifier', 'text-classification', 'pipeline.json'], ['cove/tiny', 'feature-extraction', 'pipeline.json'],
  ['cvt/tiny', 'token-classification', 'pipeline.json'],
];

export const LANGUAGE_MODEL_CASES = [
  ['bert/BertForMaskedLM', 'fill-mask', 'fill_mask.json'],
  ['gpt2/GPT2LMHeadModel', 'perplexity', 'perplexity.json'], ['openai-gpt/OpenAIGPTLMHeadModel', 'perplexity', 'perplexity.json'],
];
