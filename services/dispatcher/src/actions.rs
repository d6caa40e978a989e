//! The actions the Dispatcher enforces: its action catalogue (Ward decides each).

lychd_runtime::auth::actions! {
    /// describe the office (`Describe`)
    DESCRIBE = "dispatcher:describe";
    /// read capabilities, one's own leases and dispatch events (`ListCapabilities`, `GetLease`, `ListLeases`, `WatchDispatchEvents`)
    READ = "dispatcher:read";
    /// see every principal's leases, not only one's own (`GetLease`, `ListLeases`, `WatchDispatchEvents`; on `lease:*`)
    READ_ALL = "dispatcher:read_all";
    /// obtain a lease on a capability, renew and release one's own leases (`Lease`, `RenewLease`, `ReleaseLease`)
    LEASE = "dispatcher:lease";
    /// renew and release any principal's lease (`RenewLease`, `ReleaseLease`; on `lease:*`)
    LEASE_ADMIN = "dispatcher:lease_admin";
    /// observe animators with a fresh probe (`ObserveAnimators`)
    OBSERVE = "dispatcher:observe";
    /// close and reopen admission on animators and await their drain (`CloseAdmission`, `ReopenAdmission`, `AwaitDrain`)
    ADMISSION = "dispatcher:admission";
    /// reopen a closure another principal closed (`ReopenAdmission`; on `closure:*`)
    ADMISSION_ADMIN = "dispatcher:admission_admin";
}
