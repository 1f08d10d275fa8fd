//! Silence hooks (`agent.hooks`, trigger `user.speech.timeout`): when the user stays silent for a
//! hook's `timeout_seconds` after the agent finished a turn, the hook fires, at most `max_count`
//! times (the counter restarts on user speech under `reset_mode: on_user_speech`).
//!
//! The clock is armed when the agent finishes a turn (and when the session becomes ready without
//! a greeting, since then the user is expected to speak first), and disarmed when the user speaks
//! or the agent starts another turn. Each hook fires at most once per stretch of silence; a `say`
//! makes the agent speak, which re-arms the clock for the next firing.

use std::time::{Duration, Instant};

use svc_domain::tools::{ResetMode, SilenceHook};

#[derive(Debug)]
struct HookState {
    hook: SilenceHook,
    timeout: Duration,
    count: u32,
    fired_this_silence: bool,
}

/// One firing.
#[derive(Debug, Clone, PartialEq)]
pub struct Firing {
    /// The hook.
    pub hook: SilenceHook,
    /// Firings of this hook so far, this one included.
    pub trigger_count: u32,
    /// Silence so far.
    pub silence_ms: u64,
}

/// The session's hooks and their shared silence clock.
#[derive(Debug, Default)]
pub struct SilenceHooks {
    hooks: Vec<HookState>,
    armed_at: Option<Instant>,
}

impl SilenceHooks {
    /// The hooks of a session.
    pub fn new(hooks: &[SilenceHook]) -> SilenceHooks {
        SilenceHooks {
            hooks: hooks
                .iter()
                .map(|hook| HookState {
                    timeout: Duration::from_secs_f64(hook.timeout_seconds.clamp(0.0, 86_400.0)),
                    hook: hook.clone(),
                    count: 0,
                    fired_this_silence: false,
                })
                .collect(),
            armed_at: None,
        }
    }

    /// Starts the silence clock (the agent finished a turn).
    pub fn arm(&mut self, now: Instant) {
        if self.hooks.is_empty() {
            return;
        }
        self.armed_at = Some(now);
        for state in &mut self.hooks {
            state.fired_this_silence = false;
        }
    }

    /// Stops the clock (the agent speaks again).
    pub fn disarm(&mut self) {
        self.armed_at = None;
    }

    /// The user spoke: the clock stops, and counters under `on_user_speech` restart.
    pub fn user_spoke(&mut self) {
        self.armed_at = None;
        for state in &mut self.hooks {
            if state.hook.reset_mode == ResetMode::OnUserSpeech {
                state.count = 0;
            }
        }
    }

    /// When the next hook is due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let armed = self.armed_at?;
        self.hooks
            .iter()
            .filter(|state| !state.fired_this_silence && state.count < state.hook.effective_max_count())
            .map(|state| armed + state.timeout)
            .min()
    }

    /// Hooks due at `now`, in order of their timeouts.
    pub fn fire_due(&mut self, now: Instant) -> Vec<Firing> {
        let Some(armed) = self.armed_at else { return Vec::new() };
        let mut due: Vec<usize> = (0..self.hooks.len())
            .filter(|&index| {
                let state = &self.hooks[index];
                !state.fired_this_silence
                    && state.count < state.hook.effective_max_count()
                    && armed + state.timeout <= now
            })
            .collect();
        due.sort_by_key(|&index| self.hooks[index].timeout);
        due.into_iter()
            .map(|index| {
                let state = &mut self.hooks[index];
                state.count += 1;
                state.fired_this_silence = true;
                Firing {
                    hook: state.hook.clone(),
                    trigger_count: state.count,
                    silence_ms: u64::try_from(now.saturating_duration_since(armed).as_millis()).unwrap_or(u64::MAX),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn hook(value: serde_json::Value) -> SilenceHook {
        let mut base = json!({"trigger": "user.speech.timeout", "action": {"type": "say", "text": "Still there?"}});
        if let (Some(base), Some(extra)) = (base.as_object_mut(), value.as_object()) {
            base.extend(extra.clone());
        }
        serde_json::from_value(base).expect("hook")
    }

    #[test]
    fn a_hook_fires_once_per_silence_up_to_its_max_count() {
        let t0 = Instant::now();
        let mut hooks = SilenceHooks::new(&[hook(json!({"timeout_seconds": 5, "max_count": 2}))]);
        assert_eq!(hooks.poll_timeout(), None, "not armed");
        hooks.arm(t0);
        assert_eq!(hooks.poll_timeout(), Some(t0 + Duration::from_secs(5)));
        assert!(hooks.fire_due(t0 + Duration::from_millis(4_999)).is_empty());
        let fired = hooks.fire_due(t0 + Duration::from_secs(5));
        assert_eq!(fired.iter().map(|f| (f.trigger_count, f.silence_ms)).collect::<Vec<_>>(), vec![(1, 5_000)]);
        assert_eq!(hooks.poll_timeout(), None, "once per silence");
        // The agent spoke (the say) and finished: the clock re-arms.
        let t1 = t0 + Duration::from_secs(8);
        hooks.arm(t1);
        assert_eq!(hooks.fire_due(t1 + Duration::from_secs(5)).len(), 1);
        hooks.arm(t1 + Duration::from_secs(10));
        assert_eq!(hooks.poll_timeout(), None, "max_count reached");
        hooks.user_spoke();
        hooks.arm(t1 + Duration::from_secs(20));
        assert_eq!(hooks.poll_timeout(), None, "reset_mode never: spent for the session");
    }

    #[test]
    fn on_user_speech_restarts_the_counter_and_speech_disarms() {
        let t0 = Instant::now();
        let mut hooks = SilenceHooks::new(&[
            hook(json!({"timeout_seconds": 2, "max_count": 1, "reset_mode": "on_user_speech"})),
            hook(json!({"timeout_seconds": 9, "action": {"type": "end_call"}})),
        ]);
        hooks.arm(t0);
        let fired = hooks.fire_due(t0 + Duration::from_secs(10));
        assert_eq!(fired.len(), 2, "both overdue");
        assert_eq!(fired[0].hook.timeout_seconds, 2.0, "in order of timeout");
        hooks.user_spoke();
        assert_eq!(hooks.poll_timeout(), None);
        hooks.arm(t0 + Duration::from_secs(20));
        assert_eq!(hooks.poll_timeout(), Some(t0 + Duration::from_secs(22)), "the counter restarted");
        hooks.disarm();
        assert!(hooks.fire_due(t0 + Duration::from_secs(60)).is_empty());
    }
}
