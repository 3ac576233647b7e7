// The models the demo offers. Trained models ship in models/ (served at /models/trained/),
// each with the `sesame train` command that made it. Random-weight models are the small test
// fixtures that ship with the repository: they run the real architecture and tokenizer but
// were never trained, so their answers are noise — every page says so. MiniLM is the real
// all-MiniLM-L6-v2, fetched by scripts/fetch-models.sh. `example` is the text a page starts
// with for the model (until the visitor types their own). `tasks` are the pages that offer it
// ('any': only the "Any model" page, which offers every model but ELMo).

export const MODELS = [
  { url: '/models/all-MiniLM-L6-v2/', name: 'all-MiniLM-L6-v2 (BERT, 6 layers × 384, pretrained)', tasks: ['feature-extraction', 'attention'] },
  { url: '/models/trained/bert-wikitext/', name: 'Small BERT (2 layers × 128, WordPiece 4,000), trained on WikiText-2 with masked LM + next sentence (it has learnt frequent words more than meaning)', example: 'she became one of [MASK] most popular singers .', tasks: ['fill-mask', 'next-sentence-prediction', 'attention'] },
  { url: '/models/trained/roberta-wikitext/', name: "Small RoBERTa (2 layers × 128, WordPiece 4,000), pretrained on WikiText-2 with RoBERTa's recipe: masked LM alone on full-sentence rows, masks drawn afresh (the lowest held-out perplexity of the four recipes)", example: 'she became one of [MASK] most popular singers .', tasks: ['fill-mask', 'attention'] },
  { url: '/models/trained/albert-wikitext/', name: "Small ALBERT (2 layers × 128 sharing one layer's weights, WordPiece 4,000), pretrained on WikiText-2 with ALBERT's recipe: n-gram masking and sentence-order prediction", example: 'she became one of [MASK] most popular singers .', tasks: ['fill-mask', 'attention'] },
  { url: '/models/trained/ernie-wikitext/', name: "Small ERNIE (2 layers × 128, WordPiece 4,000), pretrained on WikiText-2 with ERNIE's knowledge masking (tokens, then phrases, then place names whole) and next sentence", example: 'she became one of [MASK] most popular singers .', tasks: ['fill-mask', 'next-sentence-prediction', 'attention'] },
  { url: '/models/trained/electra-wikitext/generator/', name: "Small ELECTRA's generator (2 layers × 64, WordPiece 4,000), pretrained on WikiText-2 with ELECTRA's recipe beside its discriminator: the masked LM whose samples the discriminator learns to spot", example: 'she became one of [MASK] most popular singers .', tasks: ['fill-mask', 'attention'] },
  { url: '/models/trained/electra-wikitext/discriminator/', name: "Small ELECTRA's discriminator (2 layers × 128), pretrained on WikiText-2: a probability that each token was replaced (at this size it learnt only how many are, about one in eight)", example: 'she became one of the most popular singers .', tasks: ['any', 'attention'] },
  { url: '/models/trained/distilbert-wikitext/', name: "Small DistilBERT (1 layer × 128, WordPiece 4,000), the small BERT distilled into half its depth on WikiText-2 with DistilBERT's recipe", example: 'she became one of [MASK] most popular singers .', tasks: ['fill-mask', 'attention'] },
  { url: '/models/fixtures/bert/BertForMaskedLM/', name: 'BERT masked-LM, tiny', random: true, tasks: ['fill-mask', 'attention'] },
  { url: '/models/fixtures/bert/BertForPreTraining/', name: 'BERT pre-training heads (MLM + NSP), tiny', random: true, tasks: ['fill-mask', 'next-sentence-prediction', 'attention'] },
  { url: '/models/fixtures/bert/BertForNextSentencePrediction/', name: 'BERT next-sentence head, tiny', random: true, tasks: ['next-sentence-prediction', 'attention'] },
  { url: '/models/fixtures/bert/BertModel/', name: 'BERT encoder, tiny', random: true, tasks: ['feature-extraction', 'attention'] },
  { url: '/models/fixtures/roberta/RobertaForMaskedLM/', name: 'RoBERTa masked-LM, tiny', random: true, example: 'the cat sat on the <mask> .', tasks: ['fill-mask', 'attention'] },
  { url: '/models/fixtures/albert/AlbertForPreTraining/', name: 'ALBERT pre-training heads (MLM + sentence order; 3 layers over 2 shared groups), tiny', random: true, tasks: ['fill-mask', 'next-sentence-prediction', 'attention'] },
  { url: '/models/fixtures/distilbert/DistilBertForMaskedLM/', name: 'DistilBERT masked-LM, tiny', random: true, tasks: ['fill-mask', 'attention'] },
  { url: '/models/fixtures/electra/ElectraForMaskedLM/', name: 'ELECTRA generator (masked-LM), tiny', random: true, tasks: ['fill-mask', 'attention'] },
  { url: '/models/fixtures/ernie/ErnieForPreTraining/', name: 'ERNIE pre-training heads (task types), tiny', random: true, tasks: ['fill-mask', 'next-sentence-prediction', 'attention'] },
  { url: '/models/fixtures/roberta/RobertaForSequenceClassification/', name: 'RoBERTa NLI classifier (contradiction / neutral / entailment: zero-shot), tiny', random: true, tasks: ['any'] },
  { url: '/models/fixtures/distilbert/DistilBertForMultipleChoice/', name: 'DistilBERT multiple choice, tiny', random: true, tasks: ['any'] },
  { url: '/models/fixtures/xlm-roberta/XLMRobertaForQuestionAnswering/', name: 'XLM-RoBERTa question answering, tiny', random: true, tasks: ['any'] },
  { url: '/models/fixtures/electra/ElectraForTokenClassification/', name: 'ELECTRA token classification, tiny', random: true, tasks: ['any'] },
  { url: '/models/trained/baby-gpt-shakespeare/', name: 'Baby GPT (GPT-2, 4 layers × 128, one token per character), trained on Tiny Shakespeare', example: 'ROMEO:\nI', tasks: ['text-generation', 'perplexity', 'attention'] },
  { url: '/models/fixtures/openai-gpt/OpenAIGPTLMHeadModel/', name: 'GPT (openai-gpt), tiny', random: true, example: 'the old dog sat by the river', tasks: ['text-generation', 'perplexity', 'attention'] },
  { url: '/models/trained/awd-lstm-sst2/', name: "ULMFiT's classifier (AWD-LSTM, 2 layers × 256, embeddings 64, concat pooling), trained on SST-2's movie reviews (80% on its test set; trained from scratch — ULMFiT's WikiText-2 pretraining scores as well as this seed, better than the average seed, at four times the download)", example: 'a gripping , beautifully acted film .', tasks: ['text-classification', 'any'] },
  { url: '/models/fixtures/awd_lstm/fastai-classifier/', name: "ULMFiT's classifier (fastai's), tiny", random: true, tasks: ['text-classification', 'any'] },
  { url: '/models/trained/cvt-pos-wikitext/', name: "Cross-view training's tagger (word vectors 50 wide, a character CNN, LSTMs of 128 then 64 cells), trained on 1,000 WikiText-2 sentences with silver part-of-speech tags (92% of the words of held-out sentences right)", example: 'The old mill stood by the river for two hundred years .', tasks: ['token-classification', 'any'] },
  { url: '/models/fixtures/cvt/tiny/', name: "Cross-view training's tagger, tiny", random: true, tasks: ['token-classification', 'any'] },
  { url: '/models/trained/cove-gettext/', name: "CoVe (MT-LSTM: 2 biLSTM layers × 128 per direction over word vectors 100 wide), the encoder of an English→German translation model trained on software messages", example: 'file not found', tasks: ['feature-extraction', 'any'] },
  { url: '/models/fixtures/cove/tiny/', name: 'CoVe (MT-LSTM), tiny', random: true, tasks: ['feature-extraction', 'any'] },
  { url: '/models/trained/elmo-wikitext/', name: 'ELMo (2 biLSTM layers, 256 cells, 64 projection, 10,000-word softmax), trained on WikiText-2 as a biLM', note: 'It reads characters, so it takes any word.', tasks: ['elmo-embeddings'] },
  { url: '/models/fixtures/elmo/small/', name: 'ELMo, tiny (2 biLSTM layers, 24 cells, 8 projection)', random: true, note: 'It reads characters, so it takes any word.', tasks: ['elmo-embeddings'] },
  { url: '/models/fixtures/elmo/tanh/', name: 'ELMo, tiny (3 biLSTM layers, tanh CNN)', random: true, note: 'It reads characters, so it takes any word.', tasks: ['elmo-embeddings'] },
];

/** The tiny models know 94 words; the examples use them. */
export const TINY_VOCABULARY = `the a cat dog sat on mat ran to park and saw big small red blue house tree bird sang in morning night moon sun shone
over hill river flowed past old mill children played with ball while parents watched from bench quiet town slept under stars wind blew through
leaves rain fell softly roof fire warm kept us happy book read she he they we it was is are , . ! ? of for at by green field walked across bridge
long road home door window light dark cold day song little`;
