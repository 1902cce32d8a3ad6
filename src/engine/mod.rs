//! Judging facts against a policy.
