// The MPI-1 functions MPI-3.0 removed (deprecated since MPI-2): old programs
// and test suites still call them, so each is the call that replaced it.
#include "shim.h"

extern "C" {

int bcs_impl_Address(void* location, MPI_Aint* address) {
  return PMPI_Get_address(location, address);
}

int bcs_impl_Errhandler_create(MPI_Handler_function* function, MPI_Errhandler* errhandler) {
  return PMPI_Comm_create_errhandler(function, errhandler);
}

int bcs_impl_Errhandler_get(MPI_Comm comm, MPI_Errhandler* errhandler) {
  return PMPI_Comm_get_errhandler(comm, errhandler);
}

int bcs_impl_Errhandler_set(MPI_Comm comm, MPI_Errhandler errhandler) {
  return PMPI_Comm_set_errhandler(comm, errhandler);
}

int bcs_impl_Type_extent(MPI_Datatype datatype, MPI_Aint* extent) {
  MPI_Aint lb = 0;
  return PMPI_Type_get_extent(datatype, &lb, extent);
}

int bcs_impl_Type_lb(MPI_Datatype datatype, MPI_Aint* displacement) {
  MPI_Aint extent = 0;
  return PMPI_Type_get_extent(datatype, displacement, &extent);
}

int bcs_impl_Type_ub(MPI_Datatype datatype, MPI_Aint* displacement) {
  MPI_Aint lb = 0, extent = 0;
  const int e = PMPI_Type_get_extent(datatype, &lb, &extent);
  if (e == MPI_SUCCESS && displacement) *displacement = lb + extent;
  return e;
}

int bcs_impl_Type_hindexed(int count, int array_of_blocklengths[], MPI_Aint array_of_displacements[],
                       MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return PMPI_Type_create_hindexed(count, array_of_blocklengths, array_of_displacements, oldtype,
                                   newtype);
}

int bcs_impl_Type_hvector(int count, int blocklength, MPI_Aint stride, MPI_Datatype oldtype,
                      MPI_Datatype* newtype) {
  return PMPI_Type_create_hvector(count, blocklength, stride, oldtype, newtype);
}

int bcs_impl_Type_struct(int count, int array_of_blocklengths[], MPI_Aint array_of_displacements[],
                     MPI_Datatype array_of_types[], MPI_Datatype* newtype) {
  return PMPI_Type_create_struct(count, array_of_blocklengths, array_of_displacements,
                                 array_of_types, newtype);
}

}  // extern "C"
