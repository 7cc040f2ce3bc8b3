mod mask;
mod vocab;
