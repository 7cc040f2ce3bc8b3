mod budget;
mod distinct;
mod grammar;
mod mask;
mod mask_cache;
mod reasoning;
mod trigger;
mod vocab;
