from django.contrib.auth import views as auth_views
from django.urls import path

from previously.pages.accounts import views

urlpatterns = [
    path("account/", views.account, name="account"),
    path("account/sessions/end/", views.session_end, name="account_session_end"),
    path("account/delete/", views.account_delete, name="account_delete"),
    # Django's auth views under their usual URL names.
    path("account/password/", views.PasswordChangeView.as_view(), name="password_change"),
    path("password-reset/", auth_views.PasswordResetView.as_view(
        template_name="accounts/password_reset_form.html", email_template_name="accounts/password_reset_email.txt",
        subject_template_name="accounts/password_reset_subject.txt"), name="password_reset"),
    path("password-reset/sent/", auth_views.PasswordResetDoneView.as_view(
        template_name="accounts/password_reset_done.html"), name="password_reset_done"),
    path("password-reset/<uidb64>/<token>/", views.PasswordResetConfirmView.as_view(), name="password_reset_confirm"),
    path("password-reset/done/", auth_views.PasswordResetCompleteView.as_view(
        template_name="accounts/password_reset_complete.html"), name="password_reset_complete"),
    path("signup/", views.signup, name="signup"),
    path("signup/<str:token>/", views.signup, name="signup_invited"),
    path("people/", views.people, name="people"),
    path("people/invite/", views.invite, name="people_invite"),
    path("people/signup/", views.signup_switch, name="people_signup_switch"),
    path("people/<int:user_id>/reset-link/", views.reset_link, name="people_reset_link"),
]
