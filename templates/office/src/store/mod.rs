//! SQL on the `{{office}}` schema only, one module per aggregate as the office grows. Every
//! deciding statement states its isolation level and lock order.
