mod grammar;
mod mask;
mod vocab;
