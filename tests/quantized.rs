//! Quantized weights (f16, q8, q4) in whole models: how close they stay to f32 — MiniLM's
//! sentence embeddings against sentence-transformers' (the issue's targets: q8 cosine ≥ 0.998
//! on every sentence, also over 256 of SST-2's on the host's integer product, q4 ≥ 0.95), the trained baby GPT's greedy text against its f32 text
//! (q8: ≥ 28 of 32 tokens the same) — on lavapipe and the host device; `sesame quantize`'s
//! folders (sizes, and loading to what quantizing at load gives); and the errors of bad
//! quantized input.

mod common;
mod pretrained;

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use common::{devices, host, sesame};
use pretrained::{cache_dir, downloaded};
use sesame::embed::{sentence_embeddings, Pooling};
use sesame::generate::{generate, GenerationConfig};
use sesame::models::auto::{stored_quantization, LoadedModel};
use sesame::models::Capability;
use sesame::quantize::{QuantFormat, WeightDtype};
use sesame::Device;

#[derive(serde::Deserialize)]
struct Reference {
    sentences: Vec<String>,
    embeddings: Vec<Vec<f32>>,
}

fn minilm_dir() -> Option<PathBuf> {
    downloaded("models/all-MiniLM-L6-v2/model.safetensors")?;
    Some(PathBuf::from(format!("{}/models/all-MiniLM-L6-v2", cache_dir())))
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    dot / (a.iter().map(|x| x * x).sum::<f32>().sqrt() * b.iter().map(|y| y * y).sum::<f32>().sqrt())
}

/// The MiniLM test set's embeddings from `dir` loaded on `gpu` in `dtype`.
fn minilm_embeddings(gpu: &Device, dir: &Path, dtype: Option<WeightDtype>, sentences: &[String]) -> Vec<Vec<f32>> {
    embeddings(&LoadedModel::load_as(gpu, dir, false, dtype).unwrap(), sentences)
}

/// Sentence embeddings of `sentences` in one batch (mean pooling, normalized).
fn embeddings(loaded: &LoadedModel, sentences: &[String]) -> Vec<Vec<f32>> {
    let rows: Vec<(Vec<u32>, Vec<u32>)> = sentences.iter().map(|s| loaded.encode("embed", s, None).unwrap()).collect();
    pollster::block_on(sentence_embeddings(&*loaded.model, &loaded.batch(&rows), Pooling::Mean, true)).unwrap()
}

/// The least and the mean of the cosines of `got` against `want`, row by row.
fn cosines(got: &[Vec<f32>], want: &[Vec<f32>]) -> (f32, f32) {
    let cosines: Vec<f32> = got.iter().zip(want).map(|(g, w)| cosine(g, w)).collect();
    (cosines.iter().copied().fold(1f32, f32::min), cosines.iter().sum::<f32>() / cosines.len() as f32)
}

#[test]
fn minilm_embeddings_stay_within_each_formats_target() {
    let Some(dir) = minilm_dir() else { return };
    let reference: Reference = serde_json::from_slice(include_bytes!("fixtures/minilm/embeddings.json")).unwrap();
    for gpu in devices() {
        for (format, target) in [(QuantFormat::F16, 0.9999), (QuantFormat::Q8, 0.998), (QuantFormat::Q4, 0.95)] {
            let got = minilm_embeddings(gpu, &dir, Some(WeightDtype::Quantized(format)), &reference.sentences);
            let cosines: Vec<f32> = got.iter().zip(&reference.embeddings).map(|(g, w)| cosine(g, w)).collect();
            let (worst, mean) = (cosines.iter().copied().fold(1f32, f32::min), cosines.iter().sum::<f32>() / cosines.len() as f32);
            eprintln!("{} on {}: cosine against sentence-transformers min {worst:.5}, mean {mean:.5}", format.name(), gpu.adapter_info().name);
            for (c, sentence) in cosines.iter().zip(&reference.sentences) {
                assert!(*c >= target, "{} on {}: {sentence:?} cosine {c} < {target}", format.name(), gpu.adapter_info().name);
            }
        }
    }
}

/// q8 on the host device against sentence-transformers (f32 PyTorch) over the first 256
/// sentences of SST-2's dev set (tests/reference/make_minilm_reference.py): the issue's target,
/// cosine ≥ 0.998 on every sentence, alone (activations quantized to int8 for a sentence of at
/// most 31 tokens; longer ones to int8 too with AVX-512 VNNI, to i16 with AVX2 alone, else f32
/// over decoded panels) and in one batch (hundreds of rows: like longer sentences).
#[test]
fn q8_minilm_keeps_every_sst2_sentence_above_its_target() {
    let Some(dir) = minilm_dir() else { return };
    #[derive(serde::Deserialize)]
    struct Sentences {
        sentences: Vec<String>,
    }
    let Sentences { sentences } = serde_json::from_slice(include_bytes!("fixtures/minilm/sst2-256.json")).unwrap();
    let reference = sesame::weights::Checkpoint::from_bytes(include_bytes!("fixtures/minilm/sst2-256.safetensors").to_vec()).unwrap();
    let (values, shape) = reference.to_f32("embeddings").unwrap();
    assert_eq!(shape, [sentences.len(), 384]);
    let want: Vec<Vec<f32>> = values.chunks_exact(384).map(<[f32]>::to_vec).collect();

    let loaded = LoadedModel::load_as(host(), &dir, false, Some(WeightDtype::Quantized(QuantFormat::Q8))).unwrap();
    let alone: Vec<Vec<f32>> = sentences.iter().flat_map(|s| embeddings(&loaded, std::slice::from_ref(s))).collect();
    let int8 = sentences.iter().filter(|s| loaded.encode("embed", s, None).unwrap().0.len() <= 31).count();
    for (how, got) in
        [(format!("one at a time ({int8} of {} with activations in int8)", sentences.len()), alone), ("in one batch".into(), embeddings(&loaded, &sentences))]
    {
        let (worst, mean) = cosines(&got, &want);
        eprintln!("q8 on the host, SST-2 sentences {how}: cosine against sentence-transformers min {worst:.5}, mean {mean:.6}");
        assert!(worst >= 0.998, "q8 {how}: the least cosine {worst} < 0.998");
    }
}

#[test]
fn quantized_folders_are_small_and_load_as_quantizing_at_load_does() {
    let Some(dir) = minilm_dir() else { return };
    let out = tempfile_dir("quantized-minilm");
    let sentences = ["A quantized folder.".to_string(), "Loads as it was written, byte for byte.".to_string()];
    for (format, most) in [(QuantFormat::F16, 0.51), (QuantFormat::Q8, 0.30), (QuantFormat::Q4, 0.17)] {
        let folder = out.join(format.name());
        let (ok, stdout, err) = sesame(&["--dtype", format.name(), "quantize", "--model", dir.to_str().unwrap(), "--out", folder.to_str().unwrap()]);
        assert!(ok, "{err}");
        let report: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
        let share = report["bytes_after"].as_f64().unwrap() / report["bytes_before"].as_f64().unwrap();
        eprintln!("{}: {} matrices, weights {:.1}% of f32", format.name(), report["matrices"], 100.0 * share);
        assert!(share <= most, "{}: {share}", format.name());
        assert!(folder.join("1_Pooling/config.json").is_file() && folder.join("tokenizer.json").is_file(), "the other files are copied");
        let from_folder = minilm_embeddings(host(), &folder, None, &sentences);
        let at_load = minilm_embeddings(host(), &dir, Some(WeightDtype::Quantized(format)), &sentences);
        assert_eq!(from_folder, at_load, "{}", format.name());
    }
    // A quantized folder as fp32: its matrices decoded, as the WGSL's q8 decodes them (the
    // host's q8 quantizes the activations too).
    let as_fp32 = minilm_embeddings(host(), &out.join("q8"), Some(WeightDtype::Fp32), &sentences);
    let q8 = minilm_embeddings(common::gpu(), &out.join("q8"), None, &sentences);
    for (a, b) in as_fp32.iter().zip(&q8) {
        assert!(cosine(a, b) > 0.99999, "{}", cosine(a, b));
    }
    // Quantizing a quantized folder, or loading it in another format, is refused.
    let (ok, _, err) = sesame(&["--dtype", "q4", "quantize", "--model", out.join("q8").to_str().unwrap(), "--out", out.join("again").to_str().unwrap()]);
    assert!(!ok && err.contains("already q8; quantize the fp32 folder instead"), "{err}");
    let err = LoadedModel::load_as(host(), &out.join("q8"), false, Some(WeightDtype::Quantized(QuantFormat::Q4))).err().unwrap().to_string();
    assert!(err.contains("is stored q8; it does not load as q4"), "{err}");
    let (ok, _, err) = sesame(&["--dtype", "q8", "quantize", "--model", dir.to_str().unwrap(), "--out", out.join("q8").to_str().unwrap()]);
    assert!(!ok && err.contains("is not empty"), "{err}");
}

/// The baby GPT's greedy continuation of a prompt, loaded in `dtype`.
fn baby_gpt_greedy(gpu: &Device, dtype: WeightDtype) -> Vec<u32> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/baby-gpt-shakespeare");
    let loaded = LoadedModel::load_as(gpu, &dir, false, Some(dtype)).unwrap();
    let prompt = loaded.encode("generate", "ROMEO:\nWhat light", None).unwrap().0;
    let model = loaded.model.causal_lm(Capability::Generation, "generate").unwrap();
    let config = GenerationConfig { max_new_tokens: 32, ..Default::default() };
    pollster::block_on(generate(model, &[prompt], &config, |_, _| ControlFlow::Continue(()))).unwrap().remove(0)
}

#[test]
fn greedy_text_of_a_quantized_gpt_follows_the_f32_text() {
    for gpu in devices() {
        let fp32 = baby_gpt_greedy(gpu, WeightDtype::Fp32);
        assert_eq!(fp32.len(), 32);
        for (format, least) in [(QuantFormat::F16, 32), (QuantFormat::Q8, 28), (QuantFormat::Q4, 0)] {
            let tokens = baby_gpt_greedy(gpu, WeightDtype::Quantized(format));
            let same = tokens.iter().zip(&fp32).filter(|(a, b)| a == b).count();
            // Greedy text diverges for good after its first different token: count the prefix too.
            let prefix = tokens.iter().zip(&fp32).take_while(|(a, b)| a == b).count();
            eprintln!("{} on {}: {same} of 32 greedy tokens as f32 ({prefix} before the first difference)", format.name(), gpu.adapter_info().name);
            assert!(same >= least, "{}: {same} of 32", format.name());
        }
    }
}

#[test]
fn a_quantized_models_summary_counts_its_stored_bytes() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/baby-gpt-shakespeare");
    let summary = |dtype| LoadedModel::load_as(host(), &dir, false, Some(dtype)).unwrap().model.summary();
    let fp32 = summary(WeightDtype::Fp32);
    assert_eq!(fp32.weight_bytes, 4 * fp32.parameters);
    for (format, bytes_a_value) in [(QuantFormat::F16, 2.0), (QuantFormat::Q8, 1.0), (QuantFormat::Q4, 0.5)] {
        let quantized = summary(WeightDtype::Quantized(format));
        // The same parameters; the matrices (most of them) in their format, the layer norms
        // and biases still f32, and the scales on top.
        assert_eq!(quantized.parameters, fp32.parameters, "{}", format.name());
        let share = quantized.weight_bytes as f64 / fp32.weight_bytes as f64;
        eprintln!("{}: weights {:.1}% of f32", format.name(), 100.0 * share);
        assert!(share > bytes_a_value / 4.0 && share < bytes_a_value / 4.0 + 0.08, "{}: {share}", format.name());
    }
    // A quantized folder decoded to fp32 holds f32 again.
    let folder = tempfile_dir("summary-bytes").join("q8");
    let (ok, _, err) = sesame(&["--dtype", "q8", "quantize", "--model", dir.to_str().unwrap(), "--out", folder.to_str().unwrap()]);
    assert!(ok, "{err}");
    let decoded = LoadedModel::load_as(host(), &folder, false, Some(WeightDtype::Fp32)).unwrap().model.summary();
    assert_eq!((decoded.parameters, decoded.weight_bytes), (fp32.parameters, fp32.weight_bytes));
}

#[test]
fn a_configs_quantization_record_is_read_or_named_in_its_error() {
    let read = |json: &str| stored_quantization(json.as_bytes()).map_err(|e| e.to_string());
    assert_eq!(read(r#"{"model_type": "bert"}"#), Ok(None));
    assert_eq!(read(r#"{"sesame_quantization": null}"#), Ok(None));
    assert_eq!(read(r#"{"sesame_quantization": {"format": "q4", "version": 1}}"#), Ok(Some(QuantFormat::Q4)));
    let err = read(r#"{"model_type": "bert",}"#).unwrap_err();
    assert!(err.contains("config.json is not valid JSON") && !err.contains("sesame_quantization"), "{err}");
    let err = read(r#"{"sesame_quantization": {"format": "q3", "version": 1}}"#).unwrap_err();
    assert!(err.contains("sesame_quantization: unknown format `q3`"), "{err}");
    assert_eq!(read(r#"{"sesame_quantization": {"format": "q8", "version": 2}}"#), Ok(Some(QuantFormat::Q8)));
    let err = read(r#"{"sesame_quantization": {"format": "q8", "version": 3}}"#).unwrap_err();
    assert!(err.contains("version 3 is not one this Sesame reads (1 to 2)"), "{err}");
    let err = read(r#"{"sesame_quantization": {"format": "q8"}}"#).unwrap_err();
    assert!(err.contains("sesame_quantization: missing field `version`"), "{err}");
}

#[test]
fn bad_quantized_input_is_a_clear_error() {
    let out = tempfile_dir("bad-quantized");
    let gpt = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/baby-gpt-shakespeare");
    let folder = out.join("q8");
    let (ok, _, err) = sesame(&["--dtype", "q8", "quantize", "--model", gpt.to_str().unwrap(), "--out", folder.to_str().unwrap()]);
    assert!(ok, "{err}");
    // A generation from the quantized folder works as any other.
    let (ok, stdout, err) = sesame(&["--adapter", "host", "generate", "--model", folder.to_str().unwrap(), "--prompt", "ROMEO:\n", "--max-new-tokens", "8"]);
    assert!(ok && stdout.starts_with("ROMEO:\n"), "{err}");

    // An unknown format tag, a future version.
    let config = std::fs::read_to_string(folder.join("config.json")).unwrap();
    for (from, to, says) in [("\"q8\"", "\"q3\"", "unknown format `q3`"), ("\"version\": 2", "\"version\": 3", "version 3 is not one this Sesame reads")] {
        std::fs::write(folder.join("config.json"), config.replace(from, to)).unwrap();
        let err = LoadedModel::load(host(), &folder, false).err().unwrap().to_string();
        assert!(err.contains(says) && err.contains("sesame_quantization"), "{err}");
    }
    std::fs::write(folder.join("config.json"), &config).unwrap();

    // Scales that do not fit their matrix.
    let bytes = std::fs::read(folder.join("model.safetensors")).unwrap();
    let checkpoint = sesame::weights::Checkpoint::from_bytes(bytes.clone()).unwrap();
    let mut tensors: Vec<(String, sesame::quantize::StoredTensor)> = checkpoint.names().map(|n| (n.to_string(), checkpoint.stored(n).unwrap())).collect();
    let victim = "transformer.h.0.attn.c_attn.weight_scale";
    let scale = tensors.iter_mut().find(|(n, _)| n == victim).expect("the first attention's scales");
    scale.1 = (scale.1 .0, vec![10], scale.1 .2[..40].to_vec());
    let entries: Vec<_> = tensors.iter().map(|(n, (d, s, b))| (n.as_str(), *d, &s[..], &b[..])).collect();
    std::fs::write(folder.join("model.safetensors"), sesame::weights::serialize(&entries).unwrap()).unwrap();
    let err = LoadedModel::load(host(), &folder, false).err().unwrap().to_string();
    assert!(err.contains("`transformer.h.0.attn.c_attn.weight_scale` is F32 [10]; the scales of a q8 matrix of 384×128 are F32 with 1536 values"), "{err}");

    // Quantized weights do not train, and train refuses --dtype.
    std::fs::write(folder.join("model.safetensors"), &bytes).unwrap();
    let checkpoint = sesame::weights::Checkpoint::from_bytes(bytes).unwrap();
    let training = sesame::weights::Weights::new(host(), &checkpoint).recording();
    let err = sesame::models::auto::AutoModel::load(config.as_bytes(), &training).err().unwrap().to_string();
    assert!(err.contains("is q8: training needs fp32 weights (train from the fp32 model)"), "{err}");
    let (ok, _, err) = sesame(&["--dtype", "q8", "train", "--model-init", gpt.to_str().unwrap(), "--data", "unread.txt", "--out", "unwritten", "--steps", "1"]);
    assert!(!ok && err.contains("q8: training needs fp32 weights"), "{err}");
    // An output inside the model's folder would copy itself into itself.
    let copy = out.join("gpt");
    std::fs::create_dir_all(&copy).unwrap();
    for file in ["config.json", "model.safetensors", "tokenizer.json"] {
        std::fs::copy(gpt.join(file), copy.join(file)).unwrap();
    }
    let (ok, _, err) = sesame(&["--dtype", "q8", "quantize", "--model", copy.to_str().unwrap(), "--out", copy.join("q8").to_str().unwrap()]);
    assert!(!ok && err.contains("--out must be a new folder outside the model's own"), "{err}");
    assert!(!copy.join("q8").exists());
    let (ok, _, err) = sesame(&["--dtype", "fp32", "quantize", "--model", gpt.to_str().unwrap(), "--out", out.join("x").to_str().unwrap()]);
    assert!(!ok && err.contains("give --dtype f16, q8 or q4"), "{err}");
    let (ok, _, err) = sesame(&["--dtype", "int4", "info", "--model", gpt.to_str().unwrap()]);
    assert!(!ok && err.contains("unknown dtype `int4`"), "{err}");
}

/// A fresh directory under the target dir for this test's files.
fn tempfile_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
