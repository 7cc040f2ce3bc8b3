mod budget;
mod grammar;
mod mask;
mod mask_cache;
mod vocab;
