//! [`SamplingOverrides`]: the sampling knobs a caller names, laid over a base
//! [`SamplingParams`] (the model's `generation_config.json` defaults, or the plain defaults).
//!
//! Three places ask for "these knobs if given, else the base": a model's generation defaults
//! (`model::GenerationDefaults::sampling`), the
//! `strictly generate` flags, and the server's request fields. Each builds one of these and
//! calls [`over`](SamplingOverrides::over), so a knob means the same wherever it is set.
//!
//! Invariants: a `None` field leaves the base's value as it is; a `Some` field replaces it,
//! unchecked (call [`SamplingParams::validate`] on the result: the ranges live there);
//! `top_k: Some(0)` switches top-k off and is stored as `None` (the two spellings of "off").

use super::SamplingParams;

/// Knobs to set over a base [`SamplingParams`]: `None` keeps the base's value, `Some` replaces
/// it (unchecked: validate the result); `top_k: Some(0)` is off, stored as `None`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SamplingOverrides {
    pub temperature: Option<f32>,
    /// `Some(0)` is off.
    pub top_k: Option<usize>,
    pub top_p: Option<f32>,
    pub min_p: Option<f32>,
    pub top_n_sigma: Option<f32>,
    pub repetition_penalty: Option<f32>,
    pub frequency_penalty: Option<f32>,
    pub presence_penalty: Option<f32>,
    pub dry_multiplier: Option<f32>,
    pub dry_base: Option<f32>,
    pub dry_allowed_length: Option<usize>,
    /// As llama.cpp's: negative (`-1`) looks at the whole context, `0` at none (DRY off).
    pub dry_penalty_last_n: Option<i64>,
    pub dry_sequence_breakers: Option<Vec<String>>,
    pub seed: Option<u64>,
}

impl SamplingOverrides {
    /// Sets the given knobs in `params`.
    pub fn apply(&self, params: &mut SamplingParams) {
        fn set<T: Copy>(slot: &mut T, v: Option<T>) {
            if let Some(v) = v {
                *slot = v;
            }
        }
        set(&mut params.temperature, self.temperature);
        if let Some(k) = self.top_k {
            params.top_k = (k > 0).then_some(k);
        }
        set(&mut params.top_p, self.top_p);
        set(&mut params.min_p, self.min_p);
        if self.top_n_sigma.is_some() {
            params.top_n_sigma = self.top_n_sigma;
        }
        set(&mut params.repetition_penalty, self.repetition_penalty);
        set(&mut params.frequency_penalty, self.frequency_penalty);
        set(&mut params.presence_penalty, self.presence_penalty);
        set(&mut params.dry_multiplier, self.dry_multiplier);
        set(&mut params.dry_base, self.dry_base);
        set(&mut params.dry_allowed_length, self.dry_allowed_length);
        if let Some(n) = self.dry_penalty_last_n {
            params.dry_penalty_last_n = usize::try_from(n).ok();
        }
        if let Some(b) = &self.dry_sequence_breakers {
            params.dry_sequence_breakers.clone_from(b);
        }
        if self.seed.is_some() {
            params.seed = self.seed;
        }
    }

    /// `base` with the given knobs set.
    pub fn over(&self, mut base: SamplingParams) -> SamplingParams {
        self.apply(&mut base);
        base
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn none_keeps_the_base_and_some_replaces_it() {
        let base = SamplingParams { temperature: 0.6, top_k: Some(40), seed: Some(3), ..SamplingParams::default() };
        assert_eq!(SamplingOverrides::default().over(base.clone()), base);
        let o = SamplingOverrides {
            temperature: Some(0.0),
            top_k: Some(0),
            top_p: Some(0.9),
            min_p: Some(0.05),
            top_n_sigma: Some(1.5),
            repetition_penalty: Some(1.1),
            frequency_penalty: Some(0.5),
            presence_penalty: Some(-0.5),
            dry_multiplier: Some(0.8),
            dry_penalty_last_n: Some(64),
            dry_sequence_breakers: Some(vec!["\n".into()]),
            seed: Some(9),
            ..Default::default()
        };
        let s = o.over(base);
        assert_eq!(
            s,
            SamplingParams {
                temperature: 0.0,
                top_k: None,
                top_p: 0.9,
                min_p: 0.05,
                top_n_sigma: Some(1.5),
                repetition_penalty: 1.1,
                frequency_penalty: 0.5,
                presence_penalty: -0.5,
                dry_multiplier: 0.8,
                dry_penalty_last_n: Some(64),
                dry_sequence_breakers: vec!["\n".into()],
                seed: Some(9),
                ..SamplingParams::default()
            }
        );
        assert_eq!(SamplingOverrides { top_k: Some(7), ..Default::default() }.over(s).top_k, Some(7));
    }
}
