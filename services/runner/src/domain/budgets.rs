//! A run's budgets: never above loop-contract v1's `budgets` (a request above is refused, not
//! lowered). A budget of 0 in a request takes the contract's maximum. Cost is counted in
//! thousandths of the contract's cost unit (`max_cost: 20` is 20 000 here), so no float is
//! compared.

/// One budget of the contract: its request field, its maximum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// The request field (`budgets.<name>`).
    pub field: &'static str,
    pub max: u64,
}

/// The contract's budgets, in the order of `budgets` in the contract.
pub const CONTRACT: [Limit; 9] = [
    Limit {
        field: "max_steps",
        max: 64,
    },
    Limit {
        field: "max_tool_calls",
        max: 24,
    },
    Limit {
        field: "max_retries_per_transition",
        max: 3,
    },
    Limit {
        field: "max_wall_seconds",
        max: 600,
    },
    Limit {
        field: "max_suspended_seconds",
        max: 86_400,
    },
    Limit {
        field: "max_tokens",
        max: 100_000,
    },
    Limit {
        field: "max_cost_milli",
        max: 20_000,
    },
    Limit {
        field: "max_recursion_depth",
        max: 3,
    },
    Limit {
        field: "max_parallelism",
        max: 4,
    },
];

/// A run's budgets, each at most the contract's (index as [`CONTRACT`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budgets(pub [u64; 9]);

/// A requested budget above the contract's maximum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AboveContract {
    pub field: &'static str,
    pub max: u64,
}

impl Budgets {
    /// The contract's maxima.
    pub fn contract() -> Budgets {
        Budgets(CONTRACT.map(|l| l.max))
    }

    /// The budgets of a request (0: the contract's maximum); every field above the contract.
    pub fn requested(values: [u64; 9]) -> Result<Budgets, Vec<AboveContract>> {
        let mut out = [0; 9];
        let mut above = Vec::new();
        for (i, (v, l)) in values.iter().zip(CONTRACT).enumerate() {
            out[i] = match *v {
                0 => l.max,
                v if v <= l.max => v,
                _ => {
                    above.push(AboveContract {
                        field: l.field,
                        max: l.max,
                    });
                    0
                }
            };
        }
        if above.is_empty() {
            Ok(Budgets(out))
        } else {
            Err(above)
        }
    }

    /// The budget named `field`.
    pub fn get(&self, field: &str) -> Option<u64> {
        CONTRACT
            .iter()
            .position(|l| l.field == field)
            .map(|i| self.0[i])
    }

    /// Canonical text of the budgets (part of a request's digest and of a checkpoint).
    pub fn canonical(&self) -> String {
        CONTRACT
            .iter()
            .zip(self.0)
            .map(|(l, v)| format!("{}={v}", l.field))
            .collect::<Vec<_>>()
            .join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_takes_the_contract_and_above_is_refused_per_field() {
        assert_eq!(Budgets::requested([0; 9]), Ok(Budgets::contract()));
        let mut v = Budgets::contract().0;
        assert_eq!(Budgets::requested(v), Ok(Budgets::contract()));
        v[0] = 65;
        v[6] = 20_001;
        let above = Budgets::requested(v).expect_err("above");
        assert_eq!(
            above.iter().map(|a| a.field).collect::<Vec<_>>(),
            ["max_steps", "max_cost_milli"]
        );
        let b = Budgets::requested([1, 2, 3, 4, 5, 6, 7, 1, 1]).expect("within");
        assert_eq!(b.get("max_tokens"), Some(6));
        assert!(b.canonical().starts_with("max_steps=1,max_tool_calls=2"));
    }
}
