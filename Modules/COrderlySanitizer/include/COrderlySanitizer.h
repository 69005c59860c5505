#ifndef CORDERLY_SANITIZER_H
#define CORDERLY_SANITIZER_H

/// Tells ThreadSanitizer that a lock guarding `address` was taken. Does nothing unless this
/// file's translation unit is compiled with -fsanitize=thread.
void corderly_tsan_acquire(const void *address);

/// Tells ThreadSanitizer that a lock guarding `address` is about to be released.
void corderly_tsan_release(const void *address);

#endif
