//! The actions the Dispatcher enforces: its action catalogue (Ward decides each).

lychd_runtime::auth::actions! {
    /// describe the office (`Describe`)
    DESCRIBE = "dispatcher:describe";
    /// read capabilities, leases and dispatch events (`ListCapabilities`, `ListLeases`, `WatchDispatchEvents`)
    READ = "dispatcher:read";
    /// obtain a lease on a capability, renew and release it (`Lease`, `RenewLease`, `ReleaseLease`)
    LEASE = "dispatcher:lease";
    /// observe animators with a fresh probe (`ObserveAnimators`)
    OBSERVE = "dispatcher:observe";
    /// close and reopen admission on animators and await their drain (`CloseAdmission`, `ReopenAdmission`, `AwaitDrain`)
    ADMISSION = "dispatcher:admission";
}
