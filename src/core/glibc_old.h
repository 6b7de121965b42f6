/*
 * The prebuilt Linux binaries must load on glibc 2.17 (scripts/glibc-
 * symbols.js). glibc 2.34 moved libpthread's functions into libc and gave
 * them a new version, GLIBC_2.34, which a binary linked on a newer system
 * would then need. The space's files use some of them: each file that does
 * includes this header, which binds them to their first version (x86-64:
 * GLIBC_2.2.5; aarch64: GLIBC_2.17),
 * which every glibc since defines. Include it after a libc header (it needs
 * __GLIBC__).
 */
#ifndef SAB_GLIBC_OLD_H
#define SAB_GLIBC_OLD_H

#if defined(__linux__) && defined(__GLIBC__)
#define SAB__OLD(sym, version) __asm__(".symver " #sym "," #sym "@GLIBC_" #version)
#if defined(__x86_64__)
SAB__OLD(pthread_create, 2.2.5);
SAB__OLD(pthread_join, 2.2.5);
SAB__OLD(pthread_once, 2.2.5);
SAB__OLD(dlsym, 2.2.5);
#elif defined(__aarch64__)
SAB__OLD(pthread_create, 2.17);
SAB__OLD(pthread_join, 2.17);
SAB__OLD(pthread_once, 2.17);
SAB__OLD(dlsym, 2.17);
#endif
#endif

#endif /* SAB_GLIBC_OLD_H */
