#if Server
#endif
