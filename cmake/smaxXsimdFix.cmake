# Debian's xsimd 8.1 package config lists `xtl` in the xsimd target's
# INTERFACE_LINK_LIBRARIES although xtl is neither installed nor needed, so
# every consumer would link -lxtl and fail. Drop it when no xtl target exists.
if(TARGET xsimd AND NOT TARGET xtl)
  get_target_property(_smax_xsimd_libs xsimd INTERFACE_LINK_LIBRARIES)
  if(_smax_xsimd_libs)
    list(REMOVE_ITEM _smax_xsimd_libs xtl)
    set_property(TARGET xsimd PROPERTY INTERFACE_LINK_LIBRARIES "${_smax_xsimd_libs}")
  endif()
  unset(_smax_xsimd_libs)
endif()
