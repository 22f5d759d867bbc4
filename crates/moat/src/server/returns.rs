//! What a handler may return: its output itself when it cannot fail, or a `Result` whose
//! error the client sees (an `isError` tool result; a JSON-RPC error for a resource or a
//! prompt). So `|Add { a, b }| async move { a + b }` is a whole tool handler.

use std::convert::Infallible;
use std::fmt::Display;

use super::prompts::PromptOutput;
use super::resources::ResourceOutput;
use super::tools::ToolOutput;

/// What a tool handler returns: any [`ToolOutput`], or a `Result` of one.
pub trait ToolReturn: Send + 'static {
    /// The output on success.
    type Output: ToolOutput;
    /// The error on failure ([`Infallible`] for a handler that returns its output itself).
    type Error: Display + Send + 'static;
    /// The output, or the error.
    fn into_result(self) -> Result<Self::Output, Self::Error>;
}

impl<T: ToolOutput> ToolReturn for T {
    type Output = T;
    type Error = Infallible;
    fn into_result(self) -> Result<T, Infallible> {
        Ok(self)
    }
}

impl<T: ToolOutput, E: Display + Send + 'static> ToolReturn for Result<T, E> {
    type Output = T;
    type Error = E;
    fn into_result(self) -> Result<T, E> {
        self
    }
}

/// What a resource handler returns: any [`ResourceOutput`], or a `Result` of one.
pub trait ResourceReturn: Send + 'static {
    /// The output on success.
    type Output: ResourceOutput;
    /// The error on failure ([`Infallible`] for a handler that returns its output itself).
    type Error: Display + Send + 'static;
    /// The output, or the error.
    fn into_result(self) -> Result<Self::Output, Self::Error>;
}

impl<T: ResourceOutput> ResourceReturn for T {
    type Output = T;
    type Error = Infallible;
    fn into_result(self) -> Result<T, Infallible> {
        Ok(self)
    }
}

impl<T: ResourceOutput, E: Display + Send + 'static> ResourceReturn for Result<T, E> {
    type Output = T;
    type Error = E;
    fn into_result(self) -> Result<T, E> {
        self
    }
}

/// What a prompt handler returns: any [`PromptOutput`], or a `Result` of one.
pub trait PromptReturn: Send + 'static {
    /// The output on success.
    type Output: PromptOutput;
    /// The error on failure ([`Infallible`] for a handler that returns its output itself).
    type Error: Display + Send + 'static;
    /// The output, or the error.
    fn into_result(self) -> Result<Self::Output, Self::Error>;
}

impl<T: PromptOutput> PromptReturn for T {
    type Output = T;
    type Error = Infallible;
    fn into_result(self) -> Result<T, Infallible> {
        Ok(self)
    }
}

impl<T: PromptOutput, E: Display + Send + 'static> PromptReturn for Result<T, E> {
    type Output = T;
    type Error = E;
    fn into_result(self) -> Result<T, E> {
        self
    }
}
