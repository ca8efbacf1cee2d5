"""What the synchronization must hold, with no GPU: the site grammar of the
native sources, and each site's publish contract checked on the source and
on the PTX the compiler emits (docs/architecture.md, "Layers"). Generic: a
target's spellings come from its catalog; it imports no afdep module."""
