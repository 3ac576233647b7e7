//! The real all-MiniLM-L6-v2 (downloaded by scripts/fetch-models.sh): token ids and sentence
//! embeddings of a dozen varied sentences, batched with padding, against sentence-transformers
//! (tests/reference/make_minilm_reference.py): cosine ≥ 0.99999 and max abs error ≤ 1e-4 each.

mod common;
mod pretrained;

use common::gpu;
use pretrained::{cache_dir, downloaded};
use sesame::embed::{sentence_embeddings, Pooling};
use sesame::models::auto::{AutoModel, ModelFiles};
use sesame::models::IdsBatch;
use sesame::weights::Weights;

#[derive(serde::Deserialize)]
struct Reference {
    sentences: Vec<String>,
    input_ids: Vec<Vec<u32>>,
    embeddings: Vec<Vec<f32>>,
}

#[test]
fn sentence_embeddings_match_sentence_transformers() {
    if downloaded("models/all-MiniLM-L6-v2/model.safetensors").is_none() {
        return;
    }
    let reference: Reference = serde_json::from_slice(include_bytes!("fixtures/minilm/embeddings.json")).unwrap();
    let mut files = ModelFiles::read_dir(std::path::Path::new(&format!("{}/models/all-MiniLM-L6-v2", cache_dir()))).unwrap();
    let checkpoint = files.take_checkpoint();
    let model = AutoModel::load(&files.config_json, &Weights::new(gpu(), &checkpoint)).unwrap();
    assert_eq!(model.family.model_type, "bert", "MiniLM is a BERT");
    let tokenizer = files.tokenizer(model.family.vocabulary).unwrap();

    let encoded: Vec<(Vec<u32>, Vec<u32>)> = reference.sentences.iter().map(|s| tokenizer.encode_with_types(s, None).unwrap()).collect();
    for ((ids, _), (want, sentence)) in encoded.iter().zip(reference.input_ids.iter().zip(&reference.sentences)) {
        assert_eq!(ids, want, "ids of {sentence:?}");
    }
    let got = pollster::block_on(sentence_embeddings(&*model, &IdsBatch::padded(&encoded, 0), Pooling::Mean, true)).unwrap();
    for ((g, w), sentence) in got.iter().zip(&reference.embeddings).zip(&reference.sentences) {
        let cosine: f32 =
            g.iter().zip(w).map(|(a, b)| a * b).sum::<f32>() / (g.iter().map(|a| a * a).sum::<f32>().sqrt() * w.iter().map(|b| b * b).sum::<f32>().sqrt());
        let max_abs = g.iter().zip(w).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        eprintln!("{sentence:?}: cosine {cosine:.7}, max abs err {max_abs:.2e}");
        assert!(cosine >= 0.99999 && max_abs <= 1e-4, "{sentence:?}: cosine {cosine}, max abs {max_abs}");
    }
}
